"""How the SQL port writes one table: its rows grouped by their fields, inserted by the fastest path.

On PostgreSQL (psycopg) rows go in by COPY into a temporary table and one INSERT ... SELECT ...
RETURNING: 2-3x faster than psycopg's pipelined executemany, which is 4x faster than SQLAlchemy's
multi-row VALUES (long statements psycopg must parse each time). Both need no bind processing, so they
are used only when every column has a plain type; the COPY path also needs the TEMP privilege (the
pipelined insert is the fallback). Elsewhere SQLAlchemy's ``insert().returning()``.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
from sqlalchemy import Column, Connection, Dialect, Table

from adapter.legacy.sql_schema import key_value, parser, record_schema
from adapter.ports.legacy import LegacyRefused, Record, Refusal

__all__ = ["TableTarget", "insert_rows"]


@dataclass(frozen=True, slots=True)
class _CopyStatements:
    """The COPY path of one column set on PostgreSQL: stage the rows in a temporary table ``name``
    (``create``), ``copy`` them in, ``insert`` them into the target returning their keys, ``clear``."""

    name: str
    create: str
    copy: str
    insert: str
    clear: str


_PLAIN_TYPES = (bool, int, float, Decimal, str, dt.date, dt.datetime)


def _plain(column: Column[Any]) -> bool:
    try:
        return column.type.python_type in _PLAIN_TYPES
    except NotImplementedError:
        return False


class TableTarget:
    """One table as a target: its record schema, how its values are read and how its rows go in."""

    def __init__(self, table: Table, dialect: Dialect, generated: Collection[str] = ()) -> None:
        self.table = table
        self.key_columns = list(table.primary_key.columns)
        self.schema = record_schema(table, dialect.name, generated)
        self.parsers = {str(c.name): p for c in table.columns if (p := parser(c)) is not None}
        # The fast paths (module docstring) need plain column types and psycopg.
        self._pipelined = dialect.driver == "psycopg" and all(_plain(c) for c in table.columns)
        self.copy_ok = self._pipelined
        self._quote = dialect.identifier_preparer
        self._sql: dict[tuple[str, ...], str] = {}
        self._copy: dict[tuple[str, ...], _CopyStatements] = {}

    def copy_statements(self, columns: tuple[str, ...]) -> _CopyStatements | None:
        """The statements of the COPY path for rows with these fields, or None if it does not apply."""
        if not self.copy_ok or self.pipelined_insert(columns) is None:
            return None
        found = self._copy.get(columns)
        if found is None:
            names = ", ".join(self._quote.quote(c) for c in columns)
            keys = ", ".join(self._quote.quote(str(c.name)) for c in self.key_columns)
            table = self._quote.format_table(self.table)
            stage = f"adapter_stage_{len(self._copy)}_{self.table.name}"[:63]
            temp = self._quote.quote(stage)
            found = self._copy[columns] = _CopyStatements(
                name=stage,
                create=f"CREATE TEMP TABLE {temp} ON COMMIT DROP AS SELECT {names} FROM {table} WITH NO DATA",
                copy=f"COPY {temp} ({names}) FROM STDIN",
                insert=f"INSERT INTO {table} ({names}) SELECT {names} FROM {temp} RETURNING {keys}",
                clear=f"TRUNCATE {temp}",
            )
        return found

    def pipelined_insert(self, columns: tuple[str, ...]) -> str | None:
        """``INSERT ... RETURNING <key>`` with positional parameters for psycopg, or None."""
        if not self._pipelined or not columns or not set(columns) <= set(self.table.columns.keys()):
            return None
        sql = self._sql.get(columns)
        if sql is None:
            names = ", ".join(self._quote.quote(c) for c in columns)
            keys = ", ".join(self._quote.quote(str(c.name)) for c in self.key_columns)
            marks = ", ".join(["%s"] * len(columns))
            table = self._quote.format_table(self.table)
            sql = self._sql[columns] = f"INSERT INTO {table} ({names}) VALUES ({marks}) RETURNING {keys}"
        return sql

    def rows(self, records: Sequence[Record], first: int) -> Iterator[tuple[int, list[dict[str, Any]]]]:
        """The records as rows grouped by their set of fields (one INSERT per group), each group with
        the position of its first record (``first`` is the position of ``records[0]``)."""
        position = first
        for _, group in itertools.groupby(records, key=_fields):
            rows = [self._parsed(record, position + i) for i, record in enumerate(group)]
            yield position, rows
            position += len(rows)

    def _parsed(self, record: Record, position: int) -> dict[str, Any]:
        """The record as the driver needs it; a value its column's type cannot read is refused."""
        row = dict(record)
        for name, convert in self.parsers.items():
            if name in row:
                try:
                    row[name] = convert(row[name])
                except (TypeError, ValueError, OverflowError) as exc:
                    message = "legacy add refused: the row holds a value its column's type cannot read"
                    raise LegacyRefused(
                        Refusal("invalid_text_representation", message, position=position, field=name)
                    ) from exc
        return row

    def key_of(self, value: Any) -> tuple[Any, ...]:
        """A row's primary key as the ledger kept it (JSON), back in the columns' types."""
        parts = value if len(self.key_columns) > 1 else [value]
        return tuple(key_value(column, part) for column, part in zip(self.key_columns, parts, strict=True))


def _fields(record: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(record)


def _copy_insert(cursor: Any, statements: _CopyStatements, rows: list[dict[str, Any]]) -> list[Any]:
    with cursor.copy(statements.copy) as copy:
        for row in rows:
            copy.write_row(tuple(row.values()))
    cursor.execute(statements.insert)
    keys: list[Any] = cursor.fetchall()
    cursor.execute(statements.clear)
    return keys


def _create_allowed(cursor: Any, statements: _CopyStatements) -> bool:
    """Create the temporary table inside a savepoint; False (and nothing lost) without TEMP privilege."""
    cursor.execute("SAVEPOINT adapter_stage")
    try:
        cursor.execute(statements.create)
    except psycopg.errors.InsufficientPrivilege:
        cursor.execute("ROLLBACK TO SAVEPOINT adapter_stage")
        return False
    cursor.execute("RELEASE SAVEPOINT adapter_stage")
    return True


def insert_rows(
    connection: Connection, target: TableTarget, rows: list[dict[str, Any]], staging: set[str]
) -> list[Any]:
    """Insert rows that share one set of fields; return their primary keys as tuples.

    ``staging`` holds the temporary tables this transaction created (they drop at its end).
    """
    columns = tuple(rows[0])
    statements = target.copy_statements(columns)
    if statements is not None:
        cursor: Any = connection.connection.cursor()
        try:
            if statements.name in staging or _create_allowed(cursor, statements):
                staging.add(statements.name)
                return _copy_insert(cursor, statements, rows)
            target.copy_ok = False  # no TEMP privilege here: use the pipelined insert from now on
        finally:
            cursor.close()
    sql = target.pipelined_insert(columns)
    if sql is None:
        statement = target.table.insert().returning(*target.key_columns)
        return list(connection.execute(statement, rows).all())
    cursor = connection.connection.cursor()
    try:
        cursor.executemany(sql, [tuple(row.values()) for row in rows], returning=True)
        keys: list[Any] = []
        while True:
            keys.extend(cursor.fetchall())
            if not cursor.nextset():
                return keys
    finally:
        cursor.close()
