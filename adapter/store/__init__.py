"""The durable store: tables, repositories and the unit of work, behind one small facade."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine

from adapter.store.engine import make_engine, make_session_factory
from adapter.store.notify import install_event_notify
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["Store"]


class Store:
    """Owns the engine; hands out units of work. Built once at start-up by ``adapter.bootstrap``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._session_factory = make_session_factory(engine)
        # SQLite in WAL mode: a reader never waits for a writer and reads a local file.
        self.local_reads = engine.dialect.name == "sqlite"
        if engine.dialect.name == "postgresql":  # other workers hear of new events (store/notify.py)
            install_event_notify(self._session_factory)

    @classmethod
    def from_url(cls, url: str, **engine_options: Any) -> Store:
        return cls(make_engine(url, **engine_options))

    def unit_of_work(self) -> UnitOfWork:
        return UnitOfWork(self._session_factory)

    def read(self) -> Connection:
        """A connection for single-statement, read-only hot paths: no ORM session, no transaction.

        Use as ``with store.read() as conn: conn.execute(...)``.
        """
        connection = self.engine.connect().execution_options(adapter_read_only=True)
        if not self.local_reads:  # SQLite already runs without BEGIN (see engine.py); others need telling
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        return connection

    def dispose(self) -> None:
        self.engine.dispose()
