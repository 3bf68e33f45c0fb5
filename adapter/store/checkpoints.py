"""SQLite: the write-ahead log moved into the database file by a thread of its own, off the write path.

SQLite checkpoints inside the commit that takes the log past ``wal_autocheckpoint`` pages (1,000 by
default): that commit copies the log into the database file and syncs it before it returns, while
the kit's writer queue (``writers.py``) holds every other writer of the process behind it. A writer
of a lot of log, such as the purge of a long history, makes such commits often, and every writer
queued behind one waits for the copy: another tenant's one-row write saw its p99 grow 8.8x during a
purge at a million imports (``bench/history.py``), whatever the purge's batch size, since the log
grows by the same amount either way.

So a connection's own threshold is only a backstop (``BACKSTOP_PAGES``), and :class:`Checkpointer`
runs ``PRAGMA wal_checkpoint(PASSIVE)``, which waits for no reader and no writer, on a pooled
connection from its own thread, ``interval`` seconds after the first commit since its last run. An
idle store costs it nothing: the thread sleeps until a commit wakes it.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Engine, event

__all__ = ["BACKSTOP_PAGES", "Checkpointer"]

log = logging.getLogger("adapter.store.checkpoints")

BACKSTOP_PAGES = 16384
"""Log pages (64 MiB at SQLite's 4 KiB) past which a commit still checkpoints itself, should the
thread be stopped or behind: the log stays bounded whatever happens to it."""


class Checkpointer:
    """One thread per SQLite store that checkpoints its log after commits, coalescing bursts."""

    def __init__(self, engine: Engine, interval: float = 0.2) -> None:
        self._engine = engine
        self._interval = interval
        self._wrote = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.runs = 0  # checkpoints the thread ran (tests and benchmarks read it)
        event.listen(engine, "commit", self._on_commit)

    def _on_commit(self, _connection: object) -> None:
        self._wrote.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._stopping.is_set():
                    self._thread = threading.Thread(target=self._run, name="wal-checkpoint", daemon=True)
                    self._thread.start()

    def close(self) -> None:
        """Stop the thread after one last checkpoint of what was committed (once; again does nothing)."""
        with self._lock:
            if self._stopping.is_set():
                return
            self._stopping.set()
            thread, self._thread = self._thread, None
        event.remove(self._engine, "commit", self._on_commit)
        if thread is not None:
            self._wrote.set()
            thread.join(timeout=10)

    def checkpoint(self) -> tuple[int, int, int]:
        """One passive checkpoint now: SQLite's (busy, pages in the log, pages checkpointed)."""
        connection = self._engine.raw_connection()
        try:
            cursor = connection.cursor()
            try:
                busy, pages, moved = cursor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            finally:
                cursor.close()
        finally:
            connection.close()
        return int(busy), int(pages), int(moved)

    def _run(self) -> None:
        while True:
            self._wrote.wait()
            if not self._stopping.is_set():
                self._stopping.wait(self._interval)  # let the burst's other commits join this run
            self._wrote.clear()
            try:
                self.checkpoint()
                self.runs += 1
            except Exception:  # a disk problem shows in the writes themselves; try at the next commit
                log.warning("SQLite checkpoint failed", exc_info=True)
            if self._stopping.is_set():
                return
