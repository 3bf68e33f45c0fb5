"""The durable store: tables, repositories and the unit of work, behind one small facade."""

from __future__ import annotations

from types import TracebackType

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import ArgumentError

from adapter.store.engine import make_engine, make_session_factory
from adapter.store.errors import raise_translated
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["Reading", "Store"]


class Store:
    """Owns the engine; hands out units of work. Built once at start-up by ``adapter.bootstrap``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._session_factory = make_session_factory(engine)
        # SQLite in WAL mode: a reader never waits for a writer and reads a local file.
        self.local_reads = engine.dialect.name == "sqlite"

    @classmethod
    def from_url(cls, url: str) -> Store:
        """Raises ``ValueError`` for a URL no installed driver understands (no connection is made)."""
        try:
            return cls(make_engine(url))
        except ArgumentError as exc:
            raise ValueError(f"not a usable database URL ({type(exc).__name__})") from exc

    def unit_of_work(self) -> UnitOfWork:
        return UnitOfWork(self._session_factory)

    def read(self) -> Reading:
        """A connection for single-statement, read-only hot paths: no ORM session, no transaction.

        Use as ``with store.read() as conn: conn.execute(...)``; driver errors leave the block as
        ``StoreUnavailable`` (or ``StoreConflict``), as from a unit of work.
        """
        return Reading(self)

    def dispose(self) -> None:
        self.engine.dispose()


class Reading:
    """The context manager behind :meth:`Store.read`: connects on entry, translates driver errors."""

    __slots__ = ("_connection", "_store")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._connection: Connection | None = None

    def __enter__(self) -> Connection:
        try:
            connection = self._store.engine.connect().execution_options(adapter_read_only=True)
        except Exception as exc:
            self._raise_translated(exc)
            raise
        if not self._store.local_reads:  # SQLite already runs without BEGIN (see engine.py)
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        self._connection = connection
        return connection

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._connection is not None:
            self._connection.close()
        if exc is not None:
            self._raise_translated(exc)

    def _raise_translated(self, exc: BaseException) -> None:
        raise_translated(exc, self._store.engine.dialect.dbapi)
