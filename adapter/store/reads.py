"""The hot read path: ``get_import_status`` as one prepared statement on the driver's own cursor.

``get_import_status`` is the call a host makes most (it polls it). Through the ORM session it cost
several times the SQL itself; through a Core ``Connection`` it still cost 200-300 us of CPU a call
(statement caching, result processing, and on PostgreSQL a pool pre-ping round trip and an
isolation-level switch). The statement is the same every time, so it is compiled once per dialect
and run on the DB-API cursor: about 70 us on PostgreSQL with a server-side prepared statement.

* **No transaction where it costs.** A single statement sees one consistent snapshot anyway; SQLite
  connections run without BEGIN (see ``engine.py``) and the async PostgreSQL pool is in autocommit
  mode, without a pre-ping round trip. A read can simply be run again, so a connection that turns
  out dead is thrown away and the read retried once on a fresh one.
* **On the event loop, on PostgreSQL.** A worker-thread hop there and back cost more than the read
  itself (0.3-1 ms on a loaded 2-core machine, several ms with 8 clients). While a server runs,
  :class:`AsyncImportReads` keeps a small pool of psycopg's async connections on the server's own
  loop (``Store.async_reads``); the read awaits the socket and never blocks the loop. SQLite reads
  a local file in WAL mode without waiting for writers (~50 us) and runs inline; anything else
  (no server loop, another loop) takes a worker thread.
* **Times as the ORM hands them out:** aware UTC (``tables.loaded_time``, what ``UTCDateTime`` uses).
* **Compiled like every statement run on a driver's cursor** (``driver.compiled_for``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine, bindparam, literal_column, select

from adapter.domain.errors import StoreUnavailable
from adapter.domain.views import OperationSummary
from adapter.store.driver import compiled_for
from adapter.store.errors import raise_translated
from adapter.store.notify import libpq_dsn
from adapter.store.tables import ImportRow, OperationRow, loaded_time

__all__ = [
    "IMPORT_WITH_OPERATIONS",
    "STATUS_OPERATIONS",
    "AsyncImportReads",
    "ImportFields",
    "ImportReads",
    "ImportWithOperations",
]

_imports = ImportRow.__table__
_operations = OperationRow.__table__

STATUS_OPERATIONS = 20
"""How many of an import's operations its status shows: the latest. An import of a thousand adds
would otherwise send a thousand on every poll; an older one is found by its id or key."""

IMPORT_WITH_OPERATIONS = (
    select(
        _imports,
        _operations.c.id.label("op_id"),
        _operations.c.kind.label("op_kind"),
        _operations.c.status.label("op_status"),
        _operations.c.created_at.label("op_created_at"),
    )
    .select_from(_imports.outerjoin(_operations, _operations.c.import_id == _imports.c.id))
    .where(_imports.c.handle_digest == bindparam("digest"))
    .order_by(_operations.c.created_at.desc(), _operations.c.id.desc())
    # Constants in the SQL (SQLite's dialect would bind an OFFSET otherwise): the read binds only the digest.
    .limit(literal_column(str(STATUS_OPERATIONS + 1)))
    .offset(literal_column("0"))
)
"""One row per operation of the import, newest first, at most one more than
``STATUS_OPERATIONS`` (one row with NULL ``op_*`` when it has none)."""


class ImportFields(NamedTuple):
    """The import's columns as the statement returns them, with the attribute names of an ``ImportRow``."""

    id: str
    handle_digest: str
    principal: str
    tenant: str
    target: str
    state: str
    record_count: int
    staged_bytes: int | None
    revision: int
    legacy_batch_id: str | None
    expires_at: datetime
    created_at: datetime
    updated_at: datetime
    version: int


class ImportWithOperations(NamedTuple):
    """An import and its latest operations, oldest first; ``earlier``: it has older ones too."""

    row: ImportFields
    operations: tuple[OperationSummary, ...]
    earlier: bool


_WIDTH = len(ImportFields._fields)  # the import's columns come first, then the four op_* columns
_IMPORT_TIMES = tuple(i for i, name in enumerate(ImportFields._fields) if name.endswith("_at"))


def _assemble(rows: Sequence[Sequence[Any]]) -> ImportWithOperations | None:
    if not rows:
        return None
    first = list(rows[0][:_WIDTH])
    for i in _IMPORT_TIMES:
        first[i] = loaded_time(first[i])
    operations = tuple(
        OperationSummary(operation_id=op_id, kind=kind, status=status, created_at=loaded_time(created_at))
        for op_id, kind, status, created_at in (r[_WIDTH:] for r in reversed(rows[:STATUS_OPERATIONS]))
        if op_id is not None
    )
    return ImportWithOperations(ImportFields(*first), operations, len(rows) > STATUS_OPERATIONS)


class ImportReads:
    """The import-with-operations read, on ``engine``'s database (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self._postgres = engine.dialect.name == "postgresql"
        self.engine = engine
        self._dbapi = engine.dialect.dbapi
        self._sql, _ = compiled_for(IMPORT_WITH_OPERATIONS, engine.dialect)
        self._execute: Callable[[Any, str], None] = (
            self._execute_prepared if self._postgres else self._execute_plain
        )

    def import_with_operations(self, handle_digest: str) -> ImportWithOperations | None:
        """The import with this handle digest and its operations; None when no import has it."""
        try:
            try:
                return self._run(handle_digest)
            except self._dbapi.OperationalError:  # type: ignore[union-attr]
                if not self._postgres:
                    raise
                return self._run(handle_digest)  # the dead connection was invalidated: once more
        except Exception as exc:
            raise_translated(exc, self._dbapi)
            raise

    def _run(self, handle_digest: str) -> ImportWithOperations | None:
        connection = self.engine.raw_connection()
        try:
            cursor = connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                self._execute(cursor, handle_digest)
                return _assemble(cursor.fetchall())
            finally:
                cursor.close()
        except self._dbapi.OperationalError:  # type: ignore[union-attr]
            connection.invalidate()  # never handed out again
            raise
        finally:
            connection.close()

    def _execute_prepared(self, cursor: Any, handle_digest: str) -> None:
        cursor.execute(self._sql, {"digest": handle_digest}, prepare=True)

    def _execute_plain(self, cursor: Any, handle_digest: str) -> None:
        cursor.execute(self._sql, (handle_digest,))


class AsyncImportReads:
    """The same read with psycopg's async driver, on one event loop (PostgreSQL only)."""

    def __init__(self, engine: Engine, max_size: int, timeout: float) -> None:
        """``timeout``: how long a read waits for a connection before the store counts as unavailable."""
        from psycopg_pool import AsyncConnectionPool, PoolTimeout  # PostgreSQL only

        self._pool_timeout = PoolTimeout

        conninfo = libpq_dsn(engine.url)
        self._sql, _ = compiled_for(IMPORT_WITH_OPERATIONS, engine.dialect)
        self._dbapi = engine.dialect.dbapi
        self._pool = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            open=False,
            timeout=timeout,
            kwargs={"autocommit": True},
            name="adapter-status-reads",
        )

    async def open(self) -> None:
        await self._pool.open(wait=False)  # connections are made in the background, on demand

    async def close(self) -> None:
        await self._pool.close()

    async def import_with_operations(self, handle_digest: str) -> ImportWithOperations | None:
        try:
            try:
                return await self._run(handle_digest)
            except self._dbapi.OperationalError:  # type: ignore[union-attr]
                # A dead connection usually means a restarted or failed-over server, so its idle
                # siblings are dead too: test them all (what SQLAlchemy does on a disconnect), then
                # run the read once more.
                await self._pool.check()
                return await self._run(handle_digest)
        except self._pool_timeout as exc:  # no connection came free, or none could be made
            raise StoreUnavailable() from exc
        except Exception as exc:
            raise_translated(exc, self._dbapi)
            raise

    async def _run(self, handle_digest: str) -> ImportWithOperations | None:
        async with self._pool.connection() as connection, connection.cursor() as cursor:
            await cursor.execute(self._sql, {"digest": handle_digest}, prepare=True)
            return _assemble(await cursor.fetchall())
