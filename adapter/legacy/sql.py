"""A :class:`~adapter.ports.legacy.LegacyPort` for a legacy system that is a relational database.

Many systems worth wrapping are, underneath, tables. This port makes each table a target:

* the record schema of a target is derived from the table's columns by reflection (types, lengths,
  NOT NULL; columns with a default or an auto-increment key are optional; unknown fields refused);
* one batch is one database transaction on one connection: ``add`` inserts the rows, ``commit``
  inserts one row into a batch ledger table (``adapter_batch_ledger`` by default, created if missing)
  in the same transaction and commits it, so the rows and their ledger row land together or not at all;
* ``batch_status`` reads the ledger; ``void_batch`` deletes the batch's rows by the primary keys the
  ledger kept and marks the ledger row voided, in one transaction; a second VOID finds the mark;
* a connection lost while COMMIT was in flight is :class:`LegacyOutcomeUnknown` (the database may
  have committed); the ledger answers the question afterwards.

Error translation (the one place is :func:`_translated`):

=============================================  ===============================================
database error                                 port error
=============================================  ===============================================
constraint, data or SQL error (refused)        :class:`LegacyFailed`
connection, lock, timeout (not applied)        :class:`LegacyTransient`
connection lost during COMMIT                  :class:`LegacyOutcomeUnknown`
=============================================  ===============================================

Use it with ``ADAPTER_LEGACY_PORT=adapter.legacy.sql:from_settings`` and ``ADAPTER_SQL_URL`` (plus
optional ``ADAPTER_SQL_TABLES``, ``ADAPTER_SQL_SCHEMA_NAME``, ``ADAPTER_SQL_LEDGER_TABLE``); tables without
a primary key cannot be targets (a batch could not be voided).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
from pydantic import ValidationError
from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Dialect,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    select,
    tuple_,
    update,
)
from sqlalchemy import exc as sa_exc

from adapter.config import ConfigError
from adapter.legacy.outcomes import Step, batch_status, closing_on_error, refused, where
from adapter.legacy.sql_settings import SqlPortSettings
from adapter.ports.legacy import (
    BatchStatus,
    CommittedBatch,
    LegacyOutcomeUnknown,
    LegacyTransient,
    Record,
    Target,
    VoidResult,
)

__all__ = ["SqlPort", "SqlPortSettings", "SqlSession", "from_settings", "lose_commit_reply"]

BATCH_PREFIX = "sql-"
_DELETE_CHUNK = 500


_UNREACHABLE = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,
)


@contextmanager
def _translated(step: Step, context: str = "") -> Iterator[None]:
    """The one place database errors become port errors (see the module table)."""
    try:
        yield
    except (*_UNREACHABLE, psycopg.OperationalError, psycopg.InterfaceError) as exc:
        lost = where(step, context)
        if step == "commit":
            raise LegacyOutcomeUnknown(f"{lost}: connection lost, the commit may have applied") from exc
        raise LegacyTransient(f"{lost}: {type(exc).__name__}, nothing applied") from exc
    except (
        sa_exc.DBAPIError,
        sa_exc.StatementError,
        sa_exc.ArgumentError,
        psycopg.Error,  # the pipelined insert talks to psycopg directly
        TypeError,
        ValueError,
    ) as exc:
        reason = type(getattr(exc, "orig", None) or exc).__name__
        raise refused(step, reason, context) from exc


def _ledger_table(metadata: MetaData, name: str) -> Table:
    return Table(
        name,
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("batch_ref", String(200), nullable=False, index=True),
        Column("target", String(200), nullable=False),
        Column("record_count", Integer, nullable=False),
        Column("row_keys", Text, nullable=False),  # JSON list of the inserted rows' primary keys
        Column("committed_at", DateTime(timezone=True), nullable=False),
        Column("voided_at", DateTime(timezone=True), nullable=True),
    )


def _json_type(column: Column[Any]) -> dict[str, Any]:
    try:
        python_type = column.type.python_type
    except NotImplementedError:
        return {}
    if python_type is bool:
        return {"type": "boolean"}
    if python_type is int:
        return {"type": "integer"}
    if python_type in (float, Decimal):
        return {"type": "number"}
    if python_type is dt.datetime:
        return {"type": "string", "format": "date-time"}
    if python_type is dt.date:
        return {"type": "string", "format": "date"}
    if python_type is str:
        length = getattr(column.type, "length", None)
        return {"type": "string", **({"maxLength": length} if length else {})}
    return {}


def _generated_key(column: Column[Any], dialect: str) -> bool:
    """A single integer primary key the database fills in (serial, identity, SQLite rowid)."""
    if not column.primary_key or len(column.table.primary_key.columns) != 1:
        return False
    if _json_type(column).get("type") != "integer":
        return False
    return dialect == "sqlite" or column.server_default is not None or column.identity is not None


def record_schema(table: Table, dialect: str) -> dict[str, Any]:
    """The JSON Schema of one row of ``table``, derived from its reflected columns."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for column in table.columns:
        schema = _json_type(column)
        if column.nullable and "type" in schema:
            schema = {**schema, "type": [schema["type"], "null"]}
        properties[str(column.name)] = schema
        optional = (
            column.nullable
            or column.server_default is not None
            or column.default is not None
            or _generated_key(column, dialect)
        )
        if not optional:
            required.append(str(column.name))
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _parser(column: Column[Any]) -> Callable[[Any], Any] | None:
    """Turns the JSON form of a value into what the driver needs (dates arrive as ISO strings)."""
    kind = _json_type(column).get("format")
    if kind == "date":
        return lambda v: dt.date.fromisoformat(v) if isinstance(v, str) else v
    if kind == "date-time":
        return lambda v: dt.datetime.fromisoformat(v) if isinstance(v, str) else v
    return None


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


class _TableTarget:
    def __init__(self, table: Table, dialect: Dialect) -> None:
        self.table = table
        self.key_columns = list(table.primary_key.columns)
        self.schema = record_schema(table, dialect.name)
        self.parsers = {str(c.name): p for c in table.columns if (p := _parser(c)) is not None}
        # On PostgreSQL (psycopg) rows go in by COPY into a temporary table and one
        # INSERT ... SELECT ... RETURNING: 2-3x faster than psycopg's pipelined executemany, which is
        # 4x faster than SQLAlchemy's multi-row VALUES (long statements psycopg must parse each time).
        # Both need no bind processing, so they are used only when every column has a plain type;
        # the COPY path also needs the TEMP privilege (the pipelined insert is the fallback).
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

    def rows(self, records: Sequence[Record]) -> Iterator[list[dict[str, Any]]]:
        """The records as rows, grouped by their set of fields (one INSERT per group)."""
        parsers = self.parsers
        prepared: Iterator[Mapping[str, Any]] = iter(records)
        if parsers:
            prepared = (
                {k: (parsers[k](v) if k in parsers else v) for k, v in record.items()} for record in records
            )
        for _, group in itertools.groupby(prepared, key=_fields):
            yield [dict(row) for row in group]


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


def _insert(
    connection: Connection, target: _TableTarget, rows: list[dict[str, Any]], staging: set[str]
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


class SqlSession:
    """One batch: one connection, one transaction. Not thread-safe (the kit uses it from one thread)."""

    def __init__(self, port: SqlPort) -> None:
        self._port = port
        self._connection: Connection | None = None
        self._target: _TableTarget | None = None
        self._batch_ref = ""
        self._keys: list[Any] = []
        self._count = 0
        self._staging: set[str] = set()

    def begin(self, batch_ref: str, target: str) -> None:
        if self._target is not None:
            raise refused("begin", f"batch {self._batch_ref} is already open")
        table = self._port.table_target(target)
        with self._failing_closes("begin"):
            self._connection = self._port.engine.connect()
            self._connection.begin()
        self._target, self._batch_ref, self._keys, self._count = table, batch_ref, [], 0
        self._staging = set()

    def add(self, records: Sequence[Record]) -> None:
        connection, target = self._open("add")
        with self._failing_closes("add"):
            for rows in target.rows(records):
                keys = _insert(connection, target, rows, self._staging)
                self._keys.extend(list(key) if len(key) > 1 else key[0] for key in keys)
                self._count += len(rows)

    def commit(self) -> CommittedBatch:
        connection, target = self._open("commit")
        port = self._port
        with self._failing_closes("commit"):
            ledger_id = connection.execute(
                port.ledger.insert().returning(port.ledger.c.id),
                {
                    "batch_ref": self._batch_ref,
                    "target": str(target.table.name),
                    "record_count": self._count,
                    "row_keys": json.dumps(self._keys, default=str),
                    "committed_at": dt.datetime.now(dt.UTC),
                },
            ).scalar_one()
            connection.commit()
        self._target = None
        if port.reply_lost():
            self.close()
            raise LegacyOutcomeUnknown("legacy commit: reply lost (fault hook), the commit applied")
        return CommittedBatch(f"{BATCH_PREFIX}{ledger_id}", self._count)

    def rollback(self) -> None:
        self._target = None
        if self._connection is not None:
            with self._failing_closes("rollback"):
                self._connection.rollback()

    def close(self) -> None:
        self._target = None
        if self._connection is not None:
            connection, self._connection = self._connection, None
            # Closing rolls back an open transaction; if the connection is gone, so is its work.
            with contextlib.suppress(sa_exc.SQLAlchemyError):
                connection.close()

    def _open(self, step: Step) -> tuple[Connection, _TableTarget]:
        if self._target is None or self._connection is None:
            raise refused(step, "no batch is open in this session")
        return self._connection, self._target

    @contextmanager
    def _failing_closes(self, step: Step) -> Iterator[None]:
        context = f"batch_ref={self._batch_ref}" if self._batch_ref else ""
        with closing_on_error(self.close), _translated(step, context):
            yield


class SqlPort:
    """Targets are the tables of one database (or one schema of it); see the module docstring."""

    def __init__(
        self,
        engine: Engine | str,
        *,
        tables: Sequence[str] | None = None,
        schema: str | None = None,
        ledger_table: str = "adapter_batch_ledger",
        descriptions: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(engine, str):  # SQLite serializes writers: let a session wait for the lock
            extra: dict[str, Any] = {"timeout": 30} if engine.startswith("sqlite") else {}
            engine = create_engine(engine, pool_pre_ping=True, connect_args=extra)
            self._owns_engine = True
        else:
            self._owns_engine = False
        self.engine = engine
        ledger_metadata = MetaData(schema=schema)
        self.ledger = _ledger_table(ledger_metadata, ledger_table)
        with _translated("connect", "creating the batch ledger"):
            ledger_metadata.create_all(self.engine, checkfirst=True)
            reflected = MetaData(schema=schema)
            reflected.reflect(self.engine, schema=schema, only=list(tables) if tables else None)
        self._targets: dict[str, _TableTarget] = {}
        for table in reflected.sorted_tables:
            if table.name == ledger_table:
                continue
            if not table.primary_key.columns:
                if tables:
                    raise ValueError(f"table {table.name!r} has no primary key: a batch could not be voided")
                continue
            self._targets[str(table.name)] = _TableTarget(table, self.engine.dialect)
        if not self._targets:
            where = f" in schema {schema}" if schema else ""
            raise ValueError(f"no table with a primary key to import into{where}")
        self._descriptions = dict(descriptions or {})
        self._lose_replies = 0
        self._lock = threading.Lock()

    def targets(self) -> Sequence[Target]:
        return [
            Target(name, self._descriptions.get(name, f"rows of the table {name}"), t.schema)
            for name, t in self._targets.items()
        ]

    def table_target(self, name: str) -> _TableTarget:
        target = self._targets.get(name)
        if target is None:
            raise refused("begin", f"no table {name!r}")
        return target

    def open_session(self) -> SqlSession:
        return SqlSession(self)

    def batch_status(self, batch_ref: str) -> BatchStatus:
        ledger = self.ledger
        query = (
            select(ledger.c.id, ledger.c.record_count, ledger.c.voided_at)
            .where(ledger.c.batch_ref == batch_ref)
            .order_by(ledger.c.id)
        )
        with _translated("status", batch_ref), self.engine.connect() as connection:
            rows = connection.execute(query).all()
        return batch_status(
            batch_ref, ((f"{BATCH_PREFIX}{r.id}", int(r.record_count), r.voided_at is not None) for r in rows)
        )

    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        """Delete the batch's rows and mark its ledger row, in one transaction (row-locked on PostgreSQL)."""
        number = legacy_batch_id.removeprefix(BATCH_PREFIX)
        if not legacy_batch_id.startswith(BATCH_PREFIX) or not number.isdigit():
            raise refused("void", f"unknown batch {legacy_batch_id[:60]!r}")
        ledger = self.ledger
        with _translated("void", legacy_batch_id), self.engine.begin() as connection:
            row = connection.execute(
                select(ledger.c.target, ledger.c.row_keys, ledger.c.voided_at)
                .where(ledger.c.id == int(number))
                .with_for_update()
            ).one_or_none()
            if row is None:
                raise refused("void", f"unknown batch {legacy_batch_id}")
            if row.voided_at is not None:
                return VoidResult(legacy_batch_id, already_voided=True)
            target = self.table_target(row.target)
            self._delete_rows(connection, target, json.loads(row.row_keys))
            connection.execute(
                update(ledger).where(ledger.c.id == int(number)).values(voided_at=dt.datetime.now(dt.UTC))
            )
        return VoidResult(legacy_batch_id, already_voided=False)

    @staticmethod
    def _delete_rows(connection: Connection, target: _TableTarget, keys: list[Any]) -> None:
        columns = target.key_columns
        for start in range(0, len(keys), _DELETE_CHUNK):
            chunk = keys[start : start + _DELETE_CHUNK]
            if len(columns) == 1:
                condition = columns[0].in_(chunk)
            else:
                condition = tuple_(*columns).in_([tuple(k) for k in chunk])
            connection.execute(target.table.delete().where(condition))

    def reply_lost(self) -> bool:
        with self._lock:
            return self._lose_replies > 0

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()


@contextmanager
def lose_commit_reply(port: SqlPort) -> Iterator[None]:
    """Contract fault hook: while open, every COMMIT is applied and then reported as a lost reply."""
    with port._lock:
        port._lose_replies += 1
    try:
        yield
    finally:
        with port._lock:
            port._lose_replies -= 1


def from_settings(settings: Any) -> SqlPort:
    """The ``ADAPTER_LEGACY_PORT`` factory: ``adapter.legacy.sql:from_settings``."""
    try:
        sql = SqlPortSettings()  # type: ignore[call-arg]  # url comes from the environment
    except ValidationError as exc:
        name = "ADAPTER_SQL_" + str(exc.errors()[0]["loc"][0]).upper()
        raise ConfigError(f"invalid setting {name}: {exc.errors()[0]['msg']}") from None
    tables = [t.strip() for t in sql.tables.split(",") if t.strip()] or None
    return SqlPort(sql.url, tables=tables, schema=sql.schema_name, ledger_table=sql.ledger_table)
