"""SQLite's writers in one process, served in the order they came.

SQLite has one write lock per database. A writer that finds it taken sleeps in SQLite's busy
handler with a growing back-off (up to 100 ms a sleep) and may miss several moments when the lock
was free, so one tenant's long series of short write transactions (an abort deleting 330 MB in
4 MB batches) made another tenant's single write wait up to 86 ms (``bench/abuse.py``; with this
queue and 1 MB batches, 21-25 ms). Every unit
of work on SQLite therefore first takes a place in this queue, in arrival order, so a writer waits
for the transactions ahead of it and no longer. Re-entrant per thread (a nested unit of work in the
same thread waits in SQLite as before); a writer that cannot get its turn within the busy timeout
gets the same error SQLite would give.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from adapter.domain.errors import StoreUnavailable

__all__ = ["WriterQueue"]


class WriterQueue:
    """A first-come, first-served lock for the writers of one SQLite database in this process."""

    def __init__(self, timeout: float = 30.0) -> None:
        self._timeout = timeout
        self._changed = threading.Condition()
        self._waiting: deque[object] = deque()
        self._owner: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        """Wait for this thread's turn; raises ``StoreUnavailable`` after the timeout."""
        me = threading.get_ident()
        with self._changed:
            if self._owner == me:
                self._depth += 1
                return
            ticket = object()
            self._waiting.append(ticket)
            deadline = time.monotonic() + self._timeout
            while self._owner is not None or self._waiting[0] is not ticket:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._waiting.remove(ticket)
                    self._changed.notify_all()  # the next in line may be free to go now
                    raise StoreUnavailable()
                self._changed.wait(left)
            self._waiting.popleft()
            self._owner, self._depth = me, 1

    def release(self) -> None:
        with self._changed:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._changed.notify_all()
