"""Named locks across workers, for periodic work that only one worker should do at a time.

On PostgreSQL a session-level advisory lock, keyed by the schema and the name, held on one pooled
connection for the duration of the work; a worker that dies loses its connection and so its lock at
once (no lease to wait out). On SQLite (one process by design) the lock is a process-local one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy import text

if TYPE_CHECKING:
    from adapter.store import Store

__all__ = ["try_named_lock"]

_LOCAL: dict[str, threading.Lock] = {}
_LOCAL_GUARD = threading.Lock()


@contextmanager
def try_named_lock(store: Store, name: str) -> Iterator[bool]:
    """Yields True while this process holds the lock ``name``, False if another holds it (no wait)."""
    engine = store.engine
    if engine.dialect.name != "postgresql":
        with _LOCAL_GUARD:
            lock = _LOCAL.setdefault(f"{engine.url}/{name}", threading.Lock())
        acquired = lock.acquire(blocking=False)
        try:
            yield acquired
        finally:
            if acquired:
                lock.release()
        return
    key = {"name": name}
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        acquired = bool(conn.execute(_TRY_LOCK, key).scalar_one())
        try:
            yield acquired
        finally:
            if acquired:
                conn.execute(_UNLOCK, key)


_KEY = "hashtextextended(current_schema() || '/' || :name, 0)"
_TRY_LOCK = text(f"SELECT pg_try_advisory_lock({_KEY})")
_UNLOCK = text(f"SELECT pg_advisory_unlock({_KEY})")
