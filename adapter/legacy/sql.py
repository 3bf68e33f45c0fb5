"""A :class:`~adapter.ports.legacy.LegacyPort` for a legacy system that is a relational database.

Many systems worth wrapping are, underneath, tables. This port makes each table a target:

* the record schema of a target is derived from the table's columns by reflection, strict enough that
  what the database would refuse for a single value is refused at ``add`` time (types, integer
  ranges, numeric precision and scale, lengths, real calendar dates, NOT NULL, primary keys;
  ``adapter/legacy/sql_schema.py``); unknown fields are refused;
* what the database still refuses (foreign keys, unique keys, checks, triggers) is raised as
  :class:`LegacyRefused`, naming the record, the field and PostgreSQL's condition name, never a value
  (``adapter/legacy/sql_refusals.py``); SQLite enforces foreign keys here too (``PRAGMA foreign_keys``);
* one batch is one database transaction on one connection: ``add`` inserts the rows, ``commit``
  inserts one row into a batch ledger table (``adapter_batch_ledger`` by default, created if missing)
  in the same transaction and commits it, so the rows and their ledger row land together or not at all;
* ``batch_status`` reads the ledger; ``void_batch`` deletes the batch's rows by the primary keys the
  ledger kept and marks the ledger row voided, in one transaction, and only if it removed every row
  the batch inserted (else nothing is voided and it raises :class:`LegacyRefused`: a compensation
  never claims what it did not do); a second VOID finds the mark;
* a connection lost while COMMIT was in flight is :class:`LegacyOutcomeUnknown` (the database may
  have committed); the ledger answers the question afterwards.

Error translation (the one place is :func:`_translated`):

=============================================  ===============================================
database error                                 port error
=============================================  ===============================================
constraint, data or SQL error (refused)        :class:`LegacyRefused` (a :class:`LegacyFailed`)
connection, lock, timeout (not applied)        :class:`LegacyTransient`
connection lost during COMMIT                  :class:`LegacyOutcomeUnknown`
=============================================  ===============================================

Use it with ``ADAPTER_LEGACY_PORT=adapter.legacy.sql:from_settings`` and ``ADAPTER_SQL_URL`` (plus
optional ``ADAPTER_SQL_TABLES``, ``ADAPTER_SQL_SCHEMA_NAME``, ``ADAPTER_SQL_LEDGER_TABLE``,
``ADAPTER_SQL_DESCRIPTIONS``); tables without a primary key cannot be targets (a batch could not be
voided). The contract's fault hooks are :func:`lose_commit_reply` and :func:`database_down`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from pydantic import ValidationError
from pydantic_settings.exceptions import SettingsError
from sqlalchemy import (
    Column,
    Connection,
    DateTime,
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
from sqlalchemy.pool import NullPool

from adapter.config import ConfigError
from adapter.legacy.outcomes import Step, batch_status, closing_on_error, refused, where
from adapter.legacy.sql_refusals import code_of, locate, refusal_for, savepoint
from adapter.legacy.sql_schema import record_schema
from adapter.legacy.sql_settings import SqlPortSettings
from adapter.legacy.sql_tables import TableTarget, insert_rows
from adapter.ports.legacy import (
    BatchStatus,
    CommittedBatch,
    LegacyOutcomeUnknown,
    LegacyRefused,
    LegacyTransient,
    Record,
    Refusal,
    Target,
    VoidResult,
)

__all__ = [
    "SqlPort",
    "SqlPortSettings",
    "SqlSession",
    "database_down",
    "from_settings",
    "lose_commit_reply",
    "record_schema",
]

BATCH_PREFIX = "sql-"
_DELETE_CHUNK = 500


_UNREACHABLE = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
_REFUSED = (
    sa_exc.DBAPIError,
    sa_exc.StatementError,
    sa_exc.ArgumentError,
    psycopg.Error,  # the pipelined insert talks to psycopg directly
    TypeError,
    ValueError,
    OverflowError,  # a Python int the driver cannot send
)


@contextmanager
def _translated(step: Step, context: str = "", table: Table | None = None) -> Iterator[None]:
    """The one place database errors become port errors (see the module table). With ``table``, a
    refusal names its code and field (a :class:`LegacyRefused`)."""
    try:
        yield
    except _UNREACHABLE as exc:
        lost = where(step, context)
        if step == "commit":
            raise LegacyOutcomeUnknown(f"{lost}: connection lost, the commit may have applied") from exc
        raise LegacyTransient(f"{lost}: {type(exc).__name__}, nothing applied") from exc
    except _REFUSED as exc:
        if table is not None:
            raise LegacyRefused(refusal_for(exc, table, f"{where(step, context)} refused")) from exc
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


def _rowid_alias(connection: Connection, table: Table) -> set[str]:
    """SQLite: the key column that is the rowid (filled in by SQLite when left out), if there is one.

    Only a single column declared exactly ``INTEGER PRIMARY KEY`` in a rowid table is; ``INT``,
    ``BIGINT`` or ``TEXT`` keys are ordinary columns that SQLite lets be NULL."""
    columns = list(table.primary_key.columns)
    if len(columns) != 1:
        return set()
    prefix = f'"{table.schema}".' if table.schema else ""
    declared = {
        str(row[1]): str(row[2]).upper()
        for row in connection.exec_driver_sql(f'PRAGMA {prefix}table_info("{table.name}")')
    }
    ddl = connection.exec_driver_sql(
        f"SELECT sql FROM {prefix}sqlite_master WHERE type = 'table' AND name = ?", (table.name,)
    ).scalar()
    name = str(columns[0].name)
    if declared.get(name) == "INTEGER" and "WITHOUT ROWID" not in str(ddl or "").upper():
        return {name}
    return set()


class SqlSession:
    """One batch: one connection, one transaction. Not thread-safe (the kit uses it from one thread)."""

    def __init__(self, port: SqlPort) -> None:
        self._port = port
        self._connection: Connection | None = None
        self._target: TableTarget | None = None
        self._batch_ref = ""
        self._keys: list[Any] = []
        self._count = 0
        self._staging: set[str] = set()

    def begin(self, batch_ref: str, target: str) -> None:
        if self._target is not None:
            raise refused("begin", f"batch {self._batch_ref} is already open")
        table = self._port.table_target(target)
        with self._failing_closes("begin"):
            self._connection = self._port.connect()
        self._target, self._batch_ref, self._keys, self._count = table, batch_ref, [], 0
        self._staging = set()

    def add(self, records: Sequence[Record]) -> None:
        connection, target = self._open("add")
        with self._failing_closes("add"):
            for first, rows in target.rows(records, self._count):
                keys = self._insert(connection, target, rows, first)
                self._keys.extend(list(key) if len(key) > 1 else key[0] for key in keys)
                self._count += len(rows)

    def _insert(
        self, connection: Connection, target: TableTarget, rows: list[dict[str, Any]], first: int
    ) -> Any:
        """Insert one group in a savepoint; if the database refuses it, find the record and say why."""
        prefix = f"{where('add', self._context)} refused"
        with savepoint(connection, "adapter_add") as failed:
            keys = insert_rows(connection, target, rows, self._staging)
        if failed:
            found = locate(connection, target.table, rows, first, prefix)
            raise LegacyRefused(found or refusal_for(failed[0], target.table, prefix)) from failed[0]
        for index, key in enumerate(keys):
            missing = [c for c, part in zip(target.key_columns, key, strict=True) if part is None]
            if missing:  # SQLite lets a non-INTEGER key be NULL: such a row could never be voided
                message = f"{prefix}: the row has no primary key, so its batch could not be voided"
                field = str(missing[0].name)
                raise LegacyRefused(Refusal("row_key_missing", message, position=first + index, field=field))
        return keys

    def commit(self) -> CommittedBatch:
        connection, target = self._open("commit")
        port = self._port
        with self._failing_closes("commit", target.table):  # deferred constraints are checked here
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

    @property
    def _context(self) -> str:
        return f"batch_ref={self._batch_ref}" if self._batch_ref else ""

    def _open(self, step: Step) -> tuple[Connection, TableTarget]:
        if self._target is None or self._connection is None:
            raise refused(step, "no batch is open in this session")
        return self._connection, self._target

    @contextmanager
    def _failing_closes(self, step: Step, table: Table | None = None) -> Iterator[None]:
        with closing_on_error(self.close), _translated(step, self._context, table):
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
        reflected = MetaData(schema=schema)
        with _translated("connect", "creating the batch ledger"):
            ledger_metadata.create_all(self.engine, checkfirst=True)
            reflected.reflect(self.engine, schema=schema, only=list(tables) if tables else None)
            self._targets = self._reflect_targets(reflected, ledger_table, strict=bool(tables))
        if not self._targets:
            where = f" in schema {schema}" if schema else ""
            raise ValueError(f"no table with a primary key to import into{where}")
        self._descriptions = dict(descriptions or {})
        self._lose_replies = 0
        self._lock = threading.Lock()

    def _reflect_targets(
        self, reflected: MetaData, ledger_table: str, *, strict: bool
    ) -> dict[str, TableTarget]:
        found: dict[str, TableTarget] = {}
        sqlite = self.engine.dialect.name == "sqlite"
        with self.engine.connect() as connection:
            for table in reflected.sorted_tables:  # referenced tables before the tables referring to them
                if table.name == ledger_table:
                    continue
                if not table.primary_key.columns:
                    if strict:
                        raise ValueError(
                            f"table {table.name!r} has no primary key: a batch could not be voided"
                        )
                    continue
                generated = _rowid_alias(connection, table) if sqlite else set()
                found[str(table.name)] = TableTarget(table, self.engine.dialect, generated)
        return found

    def targets(self) -> Sequence[Target]:
        """One target per table; its description is the one given, else the table's comment."""
        return [Target(name, self._description(name, t.table), t.schema) for name, t in self._targets.items()]

    def _description(self, name: str, table: Table) -> str:
        return self._descriptions.get(name) or str(table.comment or "") or f"rows of the table {name}"

    def table_target(self, name: str) -> TableTarget:
        target = self._targets.get(name)
        if target is None:
            raise refused("begin", f"no table {name!r}")
        return target

    def connect(self, *, writes_first: bool = True) -> Connection:
        """A connection in a transaction of its own. On SQLite foreign keys are enforced (they are off
        by default) and the transaction is begun at once, so savepoints nest inside it; one that reads
        before it writes (``writes_first=False``) takes the write lock at once (``BEGIN IMMEDIATE``),
        so it waits for another writer instead of failing on the upgrade from reading to writing."""
        connection = self.engine.connect()
        try:
            if connection.dialect.name == "sqlite":
                connection.exec_driver_sql("PRAGMA foreign_keys = ON")  # a no-op inside a transaction
                if not getattr(connection.connection.dbapi_connection, "in_transaction", False):
                    connection.exec_driver_sql("BEGIN" if writes_first else "BEGIN IMMEDIATE")
            else:
                connection.begin()
        except BaseException:
            connection.close()
            raise
        return connection

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
        """Delete the batch's rows and mark its ledger row, in one transaction (row-locked on PostgreSQL),
        only if every row the batch inserted is removed: else nothing changes and it raises."""
        number = legacy_batch_id.removeprefix(BATCH_PREFIX)
        if not legacy_batch_id.startswith(BATCH_PREFIX) or not number.isdigit():
            raise refused("void", f"unknown batch {legacy_batch_id[:60]!r}")
        ledger = self.ledger
        with _translated("void", legacy_batch_id), self._transaction() as connection:
            row = connection.execute(
                select(ledger.c.target, ledger.c.row_keys, ledger.c.voided_at)
                .where(ledger.c.id == int(number))
                .with_for_update()
            ).one_or_none()
            if row is None:
                raise refused("void", f"unknown batch {legacy_batch_id}")
            if row.voided_at is not None:
                return VoidResult(legacy_batch_id, already_voided=True)
            target = self._targets.get(row.target)
            if target is None:
                raise refused("void", f"batch {legacy_batch_id} is of table {row.target!r}, not a target now")
            keys = [target.key_of(key) for key in json.loads(row.row_keys)]
            removed = _delete_rows(connection, target, keys, legacy_batch_id)
            if removed != len(keys):
                raise LegacyRefused(_rows_gone(legacy_batch_id, removed, len(keys)))
            connection.execute(
                update(ledger).where(ledger.c.id == int(number)).values(voided_at=dt.datetime.now(dt.UTC))
            )
        return VoidResult(legacy_batch_id, already_voided=False)

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """:meth:`connect` for a read, then write; committed if the block succeeds, else rolled back."""
        connection = self.connect(writes_first=False)
        try:
            yield connection
            connection.commit()
        finally:
            connection.close()

    def reply_lost(self) -> bool:
        with self._lock:
            return self._lose_replies > 0

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()


def _delete_rows(
    connection: Connection, target: TableTarget, keys: list[tuple[Any, ...]], batch_id: str
) -> int:
    """Delete the rows with these keys; how many there were. Rows that others refer to are refused."""
    columns = target.key_columns
    removed = 0
    try:
        for start in range(0, len(keys), _DELETE_CHUNK):
            chunk = keys[start : start + _DELETE_CHUNK]
            if len(columns) == 1:
                condition = columns[0].in_([key[0] for key in chunk])
            else:
                condition = tuple_(*columns).in_(chunk)
            removed += connection.execute(target.table.delete().where(condition)).rowcount
    except _UNREACHABLE:
        raise
    except _REFUSED as exc:
        code = code_of(exc)
        why = "other rows still refer to its rows" if code == "foreign_key_violation" else f"({code})"
        message = f"{where('void', batch_id)} refused by the database: {why}; nothing was voided"
        raise LegacyRefused(Refusal(code, message)) from exc
    return removed


def _rows_gone(batch_id: str, removed: int, inserted: int) -> Refusal:
    message = (
        f"{where('void', batch_id)} refused: the batch inserted {inserted} rows and {removed} of them are "
        "still there to delete (rows were changed or deleted since the commit); nothing was voided"
    )
    return Refusal("batch_rows_missing", message)


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


@contextmanager
def database_down(port: SqlPort) -> Iterator[None]:
    """Contract fault hook: while open, the database cannot be reached (every connection the port
    opens fails the way an unreachable server's does: PostgreSQL on a port nobody listens on, SQLite
    a file in a folder that does not exist)."""
    url = port.engine.url
    if url.get_backend_name() == "sqlite":
        dead = url.set(database="/nonexistent-adapter-outage/legacy.db")
    else:
        dead = url.set(host="127.0.0.1", port=1)
    unreachable = create_engine(dead, poolclass=NullPool)
    reachable, port.engine = port.engine, unreachable
    try:
        yield
    finally:
        port.engine = reachable
        unreachable.dispose()


def from_settings(settings: Any) -> SqlPort:
    """The ``ADAPTER_LEGACY_PORT`` factory: ``adapter.legacy.sql:from_settings``."""
    try:
        sql = SqlPortSettings()  # type: ignore[call-arg]  # url comes from the environment
    except ValidationError as exc:
        error = exc.errors()[0]
        name = "ADAPTER_SQL_" + str(error["loc"][0]).upper()
        raise ConfigError(f"invalid setting {name}: {error['msg']}") from None
    except SettingsError:
        raise ConfigError(
            'invalid setting ADAPTER_SQL_DESCRIPTIONS: expected a JSON object, {"table": "description", ...}'
        ) from None
    tables = [t.strip() for t in sql.tables.split(",") if t.strip()] or None
    return SqlPort(
        sql.url,
        tables=tables,
        schema=sql.schema_name,
        ledger_table=sql.ledger_table,
        descriptions=sql.descriptions,
    )
