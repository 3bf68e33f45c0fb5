"""Engine and session factory for SQLite (embedded default) and PostgreSQL.

SQLite runs in WAL mode with a busy timeout, and every transaction starts with ``BEGIN IMMEDIATE``:
a deferred SQLite transaction that reads and then writes can fail at once with "database is locked"
instead of waiting, which would turn ordinary concurrency into errors.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["make_engine", "make_session_factory"]


def make_engine(url: str, **kwargs: Any) -> Engine:
    # Parameters are record contents and user input: never let an error message carry them to a log.
    kwargs.setdefault("hide_parameters", True)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs)
        _configure_sqlite(engine)
        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # let SQLAlchemy's "begin" hook issue BEGIN
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # A read-only statement runs on its own (autocommit); everything else takes the write lock
        # up front (see the module docstring).
        if not connection.get_execution_options().get("adapter_read_only", False):
            connection.exec_driver_sql("BEGIN IMMEDIATE")


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
