"""A unit of work: one database transaction that rolls back unless committed.

Services open one per step (``with store.unit_of_work() as uow: ...; uow.commit()``). Repositories
hang off it so a service never builds queries itself. A driver error that leaves the block becomes
the kit's own ``StoreConflict`` or ``StoreUnavailable`` here (``adapter.store.errors``), so nothing
above the store catches a SQLAlchemy or driver class.

A step that only reads opens ``store.reading()`` instead: a read-only transaction that ends with
COMMIT (on PostgreSQL ``SET TRANSACTION READ ONLY`` first, so a write in it fails; on SQLite no write
lock). A ROLLBACK would cost more than it looks: psycopg forgets every statement it prepared on the
connection at a rollback (``DEALLOCATE ALL``), and the background loops' reads rolled back a pooled
connection about twice a second, so each of them lost its prepared statements every few seconds and
the hot path planned them again (``bench/RESULTS.md``). Not SQLAlchemy's ``postgresql_readonly``:
it hands the connection back set to READ WRITE, which would override a database made read-only
(``default_transaction_read_only``, what ``/readyz`` must see) for every later transaction.
"""

from __future__ import annotations

from types import TracebackType

from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from adapter.store.errors import StoreHealth, raise_translated
from adapter.store.repositories import (
    AuditRepository,
    CompensationRepository,
    ConfirmationRepository,
    EventRepository,
    ImportRepository,
    OperationRepository,
    RecordRepository,
    RetentionRepository,
)
from adapter.store.staging import StagingRepository
from adapter.store.writers import WriterQueue

__all__ = ["UnitOfWork"]

_READ_ONLY = text("SET TRANSACTION READ ONLY")


class UnitOfWork:
    session: Session

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        writers: WriterQueue | None = None,
        health: StoreHealth | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self._session_factory = session_factory
        self._writers = writers  # SQLite: wait for this process's earlier writers first (writers.py)
        self._health = health  # told of a write refused for a full disk (errors.py)
        self._read_only = read_only  # ends with COMMIT, see the module doc

    def __enter__(self) -> UnitOfWork:
        if self._writers is not None:
            self._writers.acquire()
        try:
            self.session = self._session_factory()
        except BaseException:
            if self._writers is not None:
                self._writers.release()
            raise
        if self._read_only and self.session.get_bind().dialect.name == "postgresql":
            self._enter_read_only()
        self.imports = ImportRepository(self.session)
        self.records = RecordRepository(self.session)
        self.operations = OperationRepository(self.session)
        self.compensations = CompensationRepository(self.session)
        self.events = EventRepository(self.session)
        self.audit = AuditRepository(self.session)
        self.retention = RetentionRepository(self.session)
        self.confirmations = ConfirmationRepository(self.session)
        self.staging = StagingRepository(self.session)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # close() rolls back anything not committed; unlike rollback() it leaves the loaded
        # attributes of returned rows readable after the block.
        try:
            if self._read_only and exc is None:
                self.session.commit()
            self.session.close()
        except Exception as close_error:
            if exc is None:  # nothing else went wrong: the failed close is the error to report
                self._raise_translated(close_error)
                raise
        finally:
            if self._writers is not None:
                self._writers.release()
        if exc is not None:
            self._raise_translated(exc)

    def _enter_read_only(self) -> None:
        try:
            self.session.execute(_READ_ONLY)
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise

    def _raise_translated(self, exc: BaseException) -> None:
        raise_translated(exc, self.session.get_bind().dialect.dbapi, self._health)

    def commit(self) -> None:
        self.session.commit()

    def flush(self) -> None:
        self.session.flush()

    def ping(self) -> None:
        """A trivial question; leaving the block raises ``StoreUnavailable`` if it got no answer."""
        self.session.execute(select(1))
