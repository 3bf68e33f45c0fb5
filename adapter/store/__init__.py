"""The durable store: tables, repositories and the unit of work, behind one small facade."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import ArgumentError

from adapter.store.checkpoints import Checkpointer
from adapter.store.engine import make_engine, make_session_factory
from adapter.store.errors import StoreHealth, raise_translated
from adapter.store.notify import EventAnnouncer, install_event_notify
from adapter.store.reads import AsyncImportReads, ImportReads, ImportWithOperations
from adapter.store.repositories import CommitFinish, finish_if_held, move_recovery_point_if_held
from adapter.store.review import ReviewReads
from adapter.store.staged import StagedWindow, staged_window
from adapter.store.staging import (
    AddAhead,
    AddLimits,
    FinishedOperation,
    NewImport,
    add_if_allowed,
    begin_if_allowed,
)
from adapter.store.unit_of_work import UnitOfWork
from adapter.store.writers import WriterQueue

__all__ = ["Store"]

T = TypeVar("T")


class Store:
    """Owns the engines; hands out units of work and the hot reads. Built once at start-up by
    ``adapter.bootstrap``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._session_factory = make_session_factory(engine)
        # SQLite: no BEGIN IMMEDIATE for a reading unit of work (engine.py); PostgreSQL ignores it.
        self._reading_factory = make_session_factory(engine.execution_options(adapter_read_only=True))
        self._reads = ImportReads(engine)
        self._async_reads: tuple[asyncio.AbstractEventLoop, AsyncImportReads] | None = None
        # SQLite in WAL mode: a reader never waits for a writer and reads a local file.
        self.local_reads = engine.dialect.name == "sqlite"
        self._writers = WriterQueue() if self.local_reads else None  # SQLite's one write lock, fairly
        self.health = StoreHealth()  # a full disk, which a probe that rolls back cannot see
        # SQLite's log is checkpointed off the write path (checkpoints.py).
        self.checkpointer = Checkpointer(engine) if self.local_reads else None
        self._announcer: EventAnnouncer | None = None
        if engine.dialect.name == "postgresql":  # other workers hear of new events (store/notify.py)
            self._announcer = install_event_notify(self._session_factory, engine)

    @classmethod
    def from_url(cls, url: str, **engine_options: Any) -> Store:
        """Raises ``ValueError`` for a URL no installed driver understands (no connection is made)."""
        try:
            return cls(make_engine(url, **engine_options))
        except ArgumentError as exc:
            raise ValueError(f"not a usable database URL ({type(exc).__name__})") from exc

    def unit_of_work(self) -> UnitOfWork:
        return UnitOfWork(self._session_factory, self._writers, self.health)

    def reading(self) -> UnitOfWork:
        """A unit of work that only reads (``unit_of_work.py``): a read-only transaction that ends
        with COMMIT, so the connection keeps its prepared statements; on SQLite it neither waits for
        this process's writers nor takes the write lock."""
        return UnitOfWork(self._reading_factory, None, self.health, read_only=True)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for single-statement, read-only paths: no ORM session, no transaction.

        Driver errors leave the block as ``StoreUnavailable`` (or ``StoreConflict``), as from a unit
        of work.
        """
        try:
            with self.engine.connect() as connection:
                connection.execution_options(adapter_read_only=True)
                if not self.local_reads:  # SQLite already runs without BEGIN (see engine.py)
                    connection.execution_options(isolation_level="AUTOCOMMIT")
                yield connection
        except Exception as exc:
            raise_translated(exc, self.engine.dialect.dbapi)
            raise

    @contextmanager
    def review_reads(self) -> Iterator[ReviewReads]:
        """The reads of an import's review (``store/review.py``) on one read connection."""
        with self.read() as connection:
            yield ReviewReads(connection)

    def staged_window(self, import_id: str, after: int, upto: int) -> StagedWindow:
        """The commit's replay read (``staged.py``): the import's staged records at positions
        ``after < seq <= upto`` as stored JSON texts, and whether the store holds any past them."""
        with self.read() as connection:
            return staged_window(connection, import_id, after, upto)

    @property
    def one_writer(self) -> bool:
        """Whether every write transaction takes the database's one write lock (SQLite), so that each
        makes every other writer wait for it to end."""
        return self.local_reads

    @property
    def writes_alone(self) -> bool:
        """Whether a begin, an add, a commit's recovery point and its finish can be written by one
        statement on its own, outside any transaction (``begin_if_allowed``, ``add_if_allowed``,
        ``move_recovery_point_if_held``, ``finish_if_held``): PostgreSQL."""
        return not self.local_reads

    def begin_if_allowed(
        self, new: NewImport, operation: FinishedOperation, max_open: int, valid_at: datetime
    ) -> bool:
        """PostgreSQL: the begin as one statement outside any transaction (``staging.begin_if_allowed``):
        a round trip instead of four (BEGIN, the import's insert, its operation's, COMMIT). Written
        only where every rule holds; whether it was. Its events are announced as a unit of work's are
        after its commit."""
        return self._alone_announced(lambda on: begin_if_allowed(on, new, operation, max_open, valid_at))

    def add_if_allowed(
        self, handle_digest: str, tenant: str, records: int, size: int, ahead: AddAhead, limits: AddLimits
    ) -> tuple[str, int] | None:
        """PostgreSQL: the add as one statement outside any transaction (``staging.add_if_allowed``):
        a round trip instead of three (BEGIN, the statement, COMMIT). Written only where every rule
        holds; the import's id and new record count, or None when nothing was written. Its events are
        announced as a unit of work's are after its commit."""
        written = self._alone(
            lambda connection: add_if_allowed(connection, handle_digest, tenant, records, size, ahead, limits)
        )
        if written is None:
            return None
        import_id, record_count, event_ids = written
        self._announce(event_ids)
        return import_id, record_count

    def move_recovery_point_if_held(
        self, operation_id: str, owner: str, held_status: str, point: str, *, attempt: bool, event_kind: str
    ) -> bool:
        """PostgreSQL: a commit's recovery point as one statement outside any transaction
        (``repositories.move_recovery_point_if_held``), a round trip instead of three, written only
        while ``owner`` holds the operation in ``held_status`` with no stop asked; whether it was.
        Its event is announced as a unit of work's are after its commit."""
        return self._alone_announced(
            lambda on: move_recovery_point_if_held(
                on, operation_id, owner, held_status, point, attempt=attempt, event_kind=event_kind
            )
        )

    def finish_if_held(self, finish: CommitFinish) -> bool:
        """PostgreSQL: a commit's finish as one statement outside any transaction
        (``repositories.finish_if_held``), a round trip instead of four (BEGIN, the read of both
        rows, the write, COMMIT), written only while the run still holds the operation and the
        import is as it claimed it; whether it was. Its events are announced as a unit of work's are
        after its commit."""
        return self._alone_announced(lambda on: finish_if_held(on, finish))

    def _alone(self, write: Callable[[Connection], T]) -> T:
        """``write`` on a connection of its own in autocommit: each of its statements commits."""
        try:
            with self.engine.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT")
                return write(connection)
        except Exception as exc:
            raise_translated(exc, self.engine.dialect.dbapi, self.health)
            raise

    def _alone_announced(self, write: Callable[[Connection], list[int] | None]) -> bool:
        """``write`` on its own (:meth:`_alone`), its events announced if it wrote: whether it did."""
        event_ids = self._alone(write)
        if event_ids is None:
            return False
        self._announce(event_ids)
        return True

    def _announce(self, event_ids: list[int]) -> None:
        if self._announcer is not None:
            self._announcer.announce(event_ids)

    def expect_audience(self) -> None:
        """Someone in this process listens for changes now: announce every commit's events from here
        on (``notify.py``: otherwise the announcer waits for its next check of the audience lock)."""
        if self._announcer is not None:
            self._announcer.expect_audience()

    def import_with_operations(self, handle_digest: str) -> ImportWithOperations | None:
        """The import with this handle digest and its operations, oldest first (``reads.py``), on the
        hot read path; None when no import has this digest."""
        return self._reads.import_with_operations(handle_digest)

    async def import_with_operations_async(self, handle_digest: str) -> ImportWithOperations | None:
        """The same read for a caller on an event loop: awaited on the loop's own async pool while
        ``async_reads`` runs on it, inline on SQLite, in a worker thread otherwise."""
        reads = self._async_reads
        if reads is not None and reads[0] is asyncio.get_running_loop():
            return await reads[1].import_with_operations(handle_digest)
        if self.local_reads:
            return self._reads.import_with_operations(handle_digest)
        return await anyio.to_thread.run_sync(self._reads.import_with_operations, handle_digest)

    @asynccontextmanager
    async def async_reads(self, max_size: int = 10, timeout: float = 10.0) -> AsyncIterator[None]:
        """Serve ``import_with_operations_async`` from a pool of async connections on this event
        loop while the block runs (a server's lifespan). No-op on SQLite."""
        if self.local_reads or self._async_reads is not None:
            yield
            return
        reads = AsyncImportReads(self.engine, max_size, timeout)
        await reads.open()
        self._async_reads = (asyncio.get_running_loop(), reads)
        try:
            yield
        finally:
            self._async_reads = None
            await reads.close()

    def disk_problem(self, min_free_bytes: int) -> str | None:
        """Why the database's disk cannot take writes, or None: a write was refused for a full disk
        within the last minute, or (SQLite, whose file is here) less than ``min_free_bytes`` free."""
        since = self.health.disk_full_since()
        if since is not None:
            return f"database disk full: a write was refused {since:.0f} s ago"
        database = self.engine.url.database if self.local_reads else None
        if not database or database == ":memory:" or database.startswith("file:") or min_free_bytes <= 0:
            return None
        try:
            free = shutil.disk_usage(Path(database).resolve().parent).free
        except OSError:
            return None  # the write probe reports a missing directory
        if free < min_free_bytes:
            return (
                f"database disk nearly full: {free // (1024 * 1024)} MiB free, "
                f"below ADAPTER_MIN_FREE_DISK_BYTES={min_free_bytes}"
            )
        return None

    def dispose(self) -> None:
        if self._announcer is not None:
            self._announcer.close()
        if self.checkpointer is not None:
            self.checkpointer.close()
        self.engine.dispose()
