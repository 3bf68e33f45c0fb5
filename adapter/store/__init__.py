"""The durable store: tables, repositories and the unit of work, behind one small facade."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, Row
from sqlalchemy.exc import ArgumentError

from adapter.store.engine import make_engine, make_session_factory
from adapter.store.errors import raise_translated
from adapter.store.reads import IMPORT_WITH_OPERATIONS
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["Store"]


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

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for single-statement, read-only hot paths: no ORM session, no transaction.

        Use as ``with store.read() as conn: conn.execute(...)``; driver errors leave the block as
        ``StoreUnavailable`` (or ``StoreConflict``), as from a unit of work.
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

    def import_with_operations(self, handle_digest: str) -> Sequence[Row[Any]]:
        """The import with this handle digest joined with its operations (``reads.py``), on the read path.

        One row per operation, oldest first (one row with NULL ``op_*`` when it has none); none when
        no import has this digest.
        """
        with self.read() as connection:
            return connection.execute(IMPORT_WITH_OPERATIONS, {"digest": handle_digest}).all()

    def dispose(self) -> None:
        self.engine.dispose()
