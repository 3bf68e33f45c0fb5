"""What a table accepts, as the JSON Schema the kit checks at ``add`` time (the SQL port's targets).

The point is that a record the database would refuse at commit is refused when it is staged, with
its index and field, instead of poisoning the commit of the whole import. So the schema of a column
says everything the database checks about a single value of its type (reflected on SQLite and
PostgreSQL alike):

=========================================  =====================================================
column type                                what a value must be
=========================================  =====================================================
``smallint`` / ``integer`` / ``bigint``    an integer within the type's range (16, 32, 64 bits;
                                           SQLite's ``INTEGER`` is 64 bits)
``numeric(p, s)``                          a number that still fits once rounded to ``s`` places:
                                           ``abs(value) < 10**(p-s) - 10**-s / 2``
``real``                                   a number within +-3.4e38
``varchar(n)`` / ``char(n)``               a string of at most ``n`` characters
``date``                                   ``YYYY-MM-DD``, a real calendar day (leap years too)
``timestamp``                              ``YYYY-MM-DDTHH:MM[:SS[.ffffff]]`` (``T`` or a space),
                                           no offset: the column keeps none
``timestamptz``                            the same with an offset (``Z`` or ``+HH:MM``)
``time``                                   ``HH:MM[:SS[.ffffff]]``
``uuid``                                   ``8-4-4-4-12`` hex digits
``boolean``                                ``true`` or ``false``
=========================================  =====================================================

``NOT NULL`` columns do not take ``null``, and are required unless the database fills them in (a
default, a serial or identity key, SQLite's rowid alias). **Primary-key columns** never take ``null``
and are required unless generated, also on SQLite, which would store a ``NULL`` key in a ``TEXT
PRIMARY KEY`` column (and the batch could then not be voided). ``GENERATED ALWAYS`` columns are not
fields at all. Dates and times are checked by ``pattern`` (JSON Schema's ``format`` is only an
annotation in the kit's validator), with ``format`` and ``examples`` beside it for the model and for
the contract kit's generated samples.

Not checked here, because they depend on other rows or on rules the schema cannot express: foreign
keys, unique keys, ``CHECK`` constraints and triggers. The database refuses those at commit, and the
port names the record and the field (``adapter/legacy/sql_refusals.py``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Collection
from decimal import Decimal
from typing import Any

from sqlalchemy import BigInteger, Column, Float, Numeric, SmallInteger, Table
from sqlalchemy.types import REAL

__all__ = ["Parser", "column_schema", "key_value", "parser", "record_schema", "writable"]

Parser = Callable[[Any], Any]

_DAY = (
    r"(?!0000)[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    r"|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29"
)
_CLOCK = r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
_OFFSET = r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
DATE_PATTERN = f"^(?:{_DAY})$"
LOCAL_DATE_TIME_PATTERN = f"^(?:{_DAY})[T ]{_CLOCK}$"
DATE_TIME_PATTERN = f"^(?:{_DAY})[T ]{_CLOCK}{_OFFSET}$"
TIME_PATTERN = f"^{_CLOCK}$"
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

_INT_BITS = {"small": 16, "integer": 32, "big": 64}
_REAL_LIMIT = 3.4028234663852886e38


def _python_type(column: Column[Any]) -> type | None:
    try:
        found: type = column.type.python_type
    except NotImplementedError:
        return None
    return found


def _integer_bits(column: Column[Any], dialect: str) -> int:
    if dialect == "sqlite" and not isinstance(column.type, SmallInteger):
        return 64  # SQLite stores every INTEGER in up to 8 bytes; SMALLINT keeps its declared width
    if isinstance(column.type, SmallInteger):
        return _INT_BITS["small"]
    if isinstance(column.type, BigInteger):
        return _INT_BITS["big"]
    return _INT_BITS["integer"]


def _numeric_bounds(column: Column[Any]) -> dict[str, Any]:
    kind = column.type
    if isinstance(kind, REAL):
        return {"minimum": -_REAL_LIMIT, "maximum": _REAL_LIMIT}
    if isinstance(kind, Float) or not isinstance(kind, Numeric):
        return {}
    precision, scale = kind.precision, kind.scale or 0
    if precision is None or not 0 <= scale <= precision:
        return {}
    # The database rounds to `scale` places first, then refuses what needs more than p - s digits.
    limit = float(Decimal(10) ** (precision - scale) - Decimal(5) * Decimal(10) ** -(scale + 1))
    return {"exclusiveMinimum": -limit, "exclusiveMaximum": limit}


def _string_schema(python_type: type, column: Column[Any]) -> dict[str, Any]:
    if python_type is dt.datetime:
        if getattr(column.type, "timezone", False):
            return {
                "type": "string",
                "format": "date-time",
                "pattern": DATE_TIME_PATTERN,
                "examples": ["2024-01-31T12:00:00+00:00"],
            }
        return {
            "type": "string",
            "pattern": LOCAL_DATE_TIME_PATTERN,
            "description": "a date and time without offset (the column keeps none)",
            "examples": ["2024-01-31T12:00:00"],
        }
    if python_type is dt.date:
        return {"type": "string", "format": "date", "pattern": DATE_PATTERN, "examples": ["2024-01-31"]}
    if python_type is dt.time:
        return {"type": "string", "pattern": TIME_PATTERN, "examples": ["12:00:00"]}
    if python_type is uuid.UUID:
        return {"type": "string", "format": "uuid", "pattern": UUID_PATTERN}
    length = getattr(column.type, "length", None)
    return {"type": "string", **({"maxLength": length} if length else {})}


def column_schema(column: Column[Any], dialect: str) -> dict[str, Any]:
    """The JSON Schema of one value of ``column`` (without ``null``; see :func:`record_schema`)."""
    python_type = _python_type(column)
    if python_type is bool:
        return {"type": "boolean"}
    if python_type is int:
        bits = _integer_bits(column, dialect)
        return {"type": "integer", "minimum": -(2 ** (bits - 1)), "maximum": 2 ** (bits - 1) - 1}
    if python_type in (float, Decimal):
        return {"type": "number", **_numeric_bounds(column)}
    if python_type in (str, dt.datetime, dt.date, dt.time, uuid.UUID):
        return _string_schema(python_type, column)
    return {}


def writable(column: Column[Any]) -> bool:
    """False for columns the database computes and refuses a value for (``GENERATED ALWAYS``)."""
    identity = column.identity
    return column.computed is None and not (identity is not None and identity.always)


def record_schema(table: Table, dialect: str, generated: Collection[str]) -> dict[str, Any]:
    """The JSON Schema of one row of ``table``; ``generated`` names the key columns the database fills."""
    key = {str(c.name) for c in table.primary_key.columns}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for column in table.columns:
        name = str(column.name)
        if not writable(column):
            continue
        schema = column_schema(column, dialect)
        nullable = bool(column.nullable) and name not in key
        if nullable and "type" in schema:
            schema = {**schema, "type": [schema["type"], "null"]}
        if column.comment:
            schema = {"description": str(column.comment), **schema}
        properties[name] = schema
        has_default = any(d is not None for d in (column.server_default, column.default, column.identity))
        if not (nullable or has_default or name in generated):
            required.append(name)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _integer(value: Any) -> Any:
    # JSON Schema counts 1.0 as an integer; the database's integer input does not.
    return int(value) if isinstance(value, float) and value.is_integer() else value


def parser(column: Column[Any]) -> Parser | None:
    """Turns the JSON form of a value into what the driver needs (dates arrive as ISO strings)."""
    python_type = _python_type(column)
    converters: dict[type, Parser] = {
        int: _integer,
        dt.date: dt.date.fromisoformat,
        dt.datetime: dt.datetime.fromisoformat,
        dt.time: dt.time.fromisoformat,
        uuid.UUID: uuid.UUID,
    }
    convert = converters.get(python_type) if python_type is not None else None
    if convert is None:
        return None
    if python_type is int:
        return convert
    return lambda value: convert(value) if isinstance(value, str) else value


def key_value(column: Column[Any], value: Any) -> Any:
    """A primary-key value as the ledger kept it (JSON, dates and decimals as text) back in its type."""
    if value is None or not isinstance(value, str):
        return value
    python_type = _python_type(column)
    if python_type is Decimal:
        return Decimal(value)
    convert = parser(column)
    return convert(value) if convert is not None and python_type is not int else value
