"""Why the database refused a batch, as a :class:`~adapter.ports.legacy.Refusal` that is safe to show.

A database's own message often quotes the refused value (PostgreSQL's ``Key (email)=(ada@example.com)
already exists``), so it is never passed on. What is passed on:

* **the code**: PostgreSQL's condition name for the SQLSTATE (``foreign_key_violation``,
  ``numeric_value_out_of_range``, ...), on SQLite the same names for its extended result codes;
* **the field**: the column PostgreSQL names (``diag.column_name``), else the columns of the
  constraint it names, else (SQLite) the columns its message lists; for a foreign key that neither
  names, the key whose referenced row is missing; for a value the column's type refuses, the
  column whose type it does not fit (each value cast on its own);
* **the record**: found by inserting the refused group's rows one by one, each in a savepoint of the
  batch's own transaction, until one is refused (only after a refusal; a batch that lands pays two
  savepoint statements per insert).
"""

from __future__ import annotations

import re
import sqlite3
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy import Connection, Table, and_, exists, select, text
from sqlalchemy import exc as sa_exc

from adapter.ports.legacy import Refusal

__all__ = ["code_of", "locate", "refusal_for", "savepoint"]

_SQLITE_CODES = {
    "SQLITE_CONSTRAINT_FOREIGNKEY": "foreign_key_violation",
    "SQLITE_CONSTRAINT_UNIQUE": "unique_violation",
    "SQLITE_CONSTRAINT_PRIMARYKEY": "unique_violation",
    "SQLITE_CONSTRAINT_NOTNULL": "not_null_violation",
    "SQLITE_CONSTRAINT_CHECK": "check_violation",
    "SQLITE_CONSTRAINT_TRIGGER": "raise_exception",
    "SQLITE_CONSTRAINT_DATATYPE": "datatype_mismatch",
    "SQLITE_MISMATCH": "datatype_mismatch",
    "SQLITE_TOOBIG": "string_data_right_truncation",
}

_WHAT = {
    "foreign_key_violation": "refers to a row that does not exist",
    "unique_violation": "has the key of a row that exists already (in the table or earlier in this import)",
    "not_null_violation": "has no value where the table needs one",
    "check_violation": "breaks a CHECK rule of the table",
    "numeric_value_out_of_range": "holds a number too large for the column",
    "string_data_right_truncation": "holds a text longer than the column allows",
    "invalid_datetime_format": "holds a date or time the database cannot read",
    "datetime_field_overflow": "holds a date or time that does not exist",
    "invalid_text_representation": "holds a value that is not of the column's type",
    "datatype_mismatch": "holds a value that is not of the column's type",
    "raise_exception": "was refused by a trigger of the table",
}

_DATA_EXCEPTION = "22"  # SQLSTATE class: the value does not fit the type
_SQLITE_COLUMNS = re.compile(r"(?:UNIQUE|NOT NULL) constraint failed: (.+)$")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_MAX_MESSAGE = 300


def _original(exc: BaseException) -> BaseException:
    orig = getattr(exc, "orig", None)
    return orig if isinstance(orig, BaseException) else exc


def code_of(exc: BaseException) -> str:
    """The refusal's code: PostgreSQL's condition name, or SQLite's mapped to the same words."""
    orig = _original(exc)
    if isinstance(orig, sqlite3.Error):
        name = str(getattr(orig, "sqlite_errorname", "") or "")
        return _SQLITE_CODES.get(name, name.removeprefix("SQLITE_").lower() or "database_error")
    if isinstance(orig, OverflowError):
        return "numeric_value_out_of_range"  # a Python int the driver cannot send (SQLite: over 64 bits)
    if isinstance(orig, ValueError | TypeError):
        return "invalid_text_representation"
    return _CAMEL.sub("_", type(orig).__name__).lower()


def _constraint_columns(table: Table, name: str) -> tuple[list[str], str]:
    """The columns of the constraint or unique index ``name`` of ``table``, and what it refers to."""
    for constraint in table.constraints:
        if constraint.name == name:
            columns = [str(c.name) for c in getattr(constraint, "columns", ())]
            referred = getattr(constraint, "referred_table", None)
            return columns, (f" in {referred.name}" if referred is not None else "")
    for index in table.indexes:
        if index.name == name:
            return [str(c.name) for c in index.columns], ""
    return [], ""


def _named_columns(exc: BaseException, table: Table) -> tuple[list[str], str, str]:
    """(columns, constraint name, what it refers to) as far as the error tells."""
    orig = _original(exc)
    if isinstance(orig, psycopg.Error):
        diag = orig.diag
        if diag.column_name:
            return [diag.column_name], diag.constraint_name or "", ""
        if diag.constraint_name:
            columns, referred = _constraint_columns(table, diag.constraint_name)
            return columns, diag.constraint_name, referred
    if isinstance(orig, sqlite3.Error):
        found = _SQLITE_COLUMNS.search(str(orig))
        if found:
            names = [part.strip().rsplit(".", 1)[-1] for part in found.group(1).split(",")]
            return names, "", ""
    return [], "", ""


def _missing_reference(connection: Connection, table: Table, row: Mapping[str, Any]) -> tuple[list[str], str]:
    """The foreign key of ``row`` whose referenced row does not exist (asked one key at a time)."""
    for constraint in table.foreign_key_constraints:
        names = [str(c.name) for c in constraint.columns]
        if any(row.get(name) is None for name in names):
            continue  # a NULL in a key part is never checked
        pairs = [(element.column, row[element.parent.name]) for element in constraint.elements]
        found = connection.execute(select(exists().where(and_(*(c == v for c, v in pairs))))).scalar()
        if not found:
            return names, f" in {constraint.referred_table.name}"
    return [], ""


def _misfit_column(connection: Connection, table: Table, row: Mapping[str, Any]) -> str | None:
    """The column whose type refuses its value in ``row``: each value cast on its own, in a savepoint."""
    dialect = connection.dialect
    for name, value in row.items():
        if value is None or name not in table.columns:
            continue
        type_sql = table.columns[name].type.compile(dialect=dialect)
        with savepoint(connection, "adapter_cast") as failed:
            connection.execute(text(f"SELECT CAST(:value AS {type_sql})"), {"value": value})
        if failed:
            return name
    return None


@contextmanager
def savepoint(connection: Connection, name: str) -> Iterator[list[BaseException]]:
    """A savepoint around the block: released if it succeeds; rolled back to if the database refuses,
    and the refusal is put in the yielded list instead of raised (anything else is raised)."""
    failed: list[BaseException] = []
    connection.exec_driver_sql(f"SAVEPOINT {name}")
    try:
        yield failed
    except (sa_exc.DBAPIError, psycopg.DatabaseError, OverflowError) as exc:
        if isinstance(exc, sa_exc.OperationalError) or isinstance(
            _original(exc), psycopg.OperationalError | sqlite3.OperationalError
        ):
            raise  # the connection or a lock, not the row: not a refusal
        connection.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {name}")
        failed.append(exc)
        return
    connection.exec_driver_sql(f"RELEASE SAVEPOINT {name}")


def refusal_for(
    exc: BaseException,
    table: Table,
    prefix: str,
    *,
    position: int | None = None,
    row: Mapping[str, Any] | None = None,
    connection: Connection | None = None,
) -> Refusal:
    """The refusal ``exc`` stands for; with the refused ``row`` (and the batch's ``connection``) the
    field is found even where the error does not name it."""
    code = code_of(exc)
    columns, constraint, referred = _named_columns(exc, table)
    if not columns and row is not None and connection is not None:
        if code == "foreign_key_violation":
            columns, referred = _missing_reference(connection, table, row)
        elif getattr(_original(exc), "sqlstate", "")[:2] == _DATA_EXCEPTION:
            misfit = _misfit_column(connection, table, row)
            columns = [misfit] if misfit else []
    columns = [c for c in columns if c in table.columns]
    what = _WHAT.get(code, f"was refused by the database ({code})")
    if code == "foreign_key_violation":
        what += referred
    detail = f" (constraint {constraint})" if constraint else ""
    if len(columns) > 1:
        detail += f" (columns {', '.join(columns)})"
    message = f"{prefix}: the row {what}{detail}"[:_MAX_MESSAGE]
    return Refusal(code, message, position=position, field=columns[0] if len(columns) == 1 else None)


def locate(
    connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]], first: int, prefix: str
) -> Refusal | None:
    """Insert ``rows`` one by one (each in a savepoint) until the database refuses one: its refusal,
    with ``first + index`` as its position; None if every row goes in alone (the group as a whole was
    refused: the caller reports that)."""
    statement = table.insert()
    for index, row in enumerate(rows):
        with savepoint(connection, "adapter_row") as failed, warnings.catch_warnings():
            warnings.simplefilter("ignore", sa_exc.SAWarning)  # "a key column given no value": we know
            connection.execute(statement, dict(row))
        if failed:
            return refusal_for(
                failed[0], table, prefix, position=first + index, row=row, connection=connection
            )
    return None
