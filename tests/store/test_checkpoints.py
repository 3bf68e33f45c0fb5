"""SQLite's log is checkpointed by the store's own thread after commits, not by the commit that
crosses SQLite's threshold while the writer queue holds every other writer (``store/checkpoints.py``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sqlalchemy import text

from adapter.store import Store
from adapter.store.checkpoints import BACKSTOP_PAGES
from adapter.store.migrate import upgrade

_INSERT = text("INSERT INTO events (kind, created_at) VALUES (:k, :t)")
_EVENT = {"t": "2026-01-01 00:00:00.000000"}


def _sqlite_store(tmp_path: Path) -> Store:
    url = f"sqlite:///{tmp_path / 'adapter.db'}"
    upgrade(url)
    return Store.from_url(url)


def test_commits_are_checkpointed_by_the_stores_thread_which_stops_with_the_store(tmp_path: Path) -> None:
    store = _sqlite_store(tmp_path)
    checkpointer = store.checkpointer
    assert checkpointer is not None
    try:
        with store.unit_of_work() as uow:  # a connection of the kit's pool: only a backstop
            assert uow.session.execute(text("PRAGMA wal_autocheckpoint")).scalar() == BACKSTOP_PAGES
        assert checkpointer.runs == 0  # nothing committed, nothing to do: the thread is not even started

        for n in range(3):
            with store.unit_of_work() as uow:
                uow.session.execute(_INSERT, _EVENT | {"k": n})
                uow.commit()
        deadline = time.monotonic() + 5
        while checkpointer.runs == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert checkpointer.runs >= 1

    finally:
        store.dispose()
        store.dispose()  # a second dispose does nothing
    assert not any(t.name == "wal-checkpoint" and t.is_alive() for t in threading.enumerate())
