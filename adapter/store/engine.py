"""Engine and session factory for SQLite (embedded default) and PostgreSQL.

SQLite runs in WAL mode with a busy timeout, and every transaction starts with ``BEGIN IMMEDIATE``:
a deferred SQLite transaction that reads and then writes can fail at once with "database is locked"
instead of waiting, which would turn ordinary concurrency into errors. Its log is checkpointed by
a thread of the store's (``checkpoints.py``), not by whichever commit crosses SQLite's threshold.
Its pool hands out the connection returned last, whose page cache is still valid (``_configure_sqlite``).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

from adapter.store.checkpoints import BACKSTOP_PAGES

__all__ = ["make_engine", "make_session_factory"]


def make_engine(url: str, **kwargs: Any) -> Engine:
    # Parameters are record contents and user input: never let an error message carry them to a log.
    kwargs.setdefault("hide_parameters", True)
    if url.startswith("sqlite"):
        if _names_a_file(url):  # an in-memory database gets a pool that takes no such option
            kwargs.setdefault("pool_use_lifo", True)  # see _configure_sqlite
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs)
        _configure_sqlite(engine)
        return engine
    engine = create_engine(url, **kwargs)
    _ping_after_idle(engine)
    return engine


IDLE_PING_SECONDS = 1.0
"""A pooled connection idle longer than this is pinged before it is handed out."""


def _ping_after_idle(engine: Engine) -> None:
    """SQLAlchemy's ``pool_pre_ping``, but only for connections that sat idle.

    ``pool_pre_ping`` costs a round trip on every checkout: a fifth of a busy worker's database
    time under load (``bench/load.py``), spent on connections used a millisecond earlier. A
    connection is most likely dead after a pause (a restarted or failed-over server, a firewall
    dropping idle flows), so only those are pinged; a dead one is thrown away and the checkout takes
    another (raising ``DisconnectionError`` here is SQLAlchemy's documented way to do that). A
    connection that dies within the second after its last use fails its statement instead, which
    the caller gets as ``database_unavailable``, and SQLAlchemy then drops the whole pool.
    """

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < IDLE_PING_SECONDS:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError() from exc
        if not alive:
            raise DisconnectionError()


def _names_a_file(url: str) -> bool:
    parsed = make_url(url)
    return parsed.database not in (None, "", ":memory:") and parsed.query.get("mode") != "memory"


def _configure_sqlite(engine: Engine) -> None:
    """WAL mode, ``BEGIN IMMEDIATE``, checkpoints off the write path; and a pool that hands out the
    connection returned last.

    In WAL mode a connection drops its whole page cache when it starts a transaction after another
    connection has written. SQLAlchemy's pool hands out the connection returned longest ago, so with
    two pooled connections every call of one thread (a write, then the status read a host polls)
    alternated between them and started cold, walking its B-trees through the OS's cache: at a
    million imports the status read took 1.36x its time on an empty database, a begin 1.38x. The
    connection returned last is the one that wrote last, its cache still valid: 0.99x and 0.90x.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # let SQLAlchemy's "begin" hook issue BEGIN
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        # Checkpoints run on a thread of their own (checkpoints.py); a commit only past the backstop.
        cursor.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # A read-only statement runs on its own (autocommit); everything else takes the write lock
        # up front (see the module docstring).
        if not connection.get_execution_options().get("adapter_read_only", False):
            connection.exec_driver_sql("BEGIN IMMEDIATE")


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
