"""Repeating background work without a thread per piece of work.

A commit renews its lease every third of the lease (``leases.Heartbeat``) and, while it runs,
pulses its progress (``progress.ProgressReporter.pulsing``). A thread of its own for each (one per
commit, once one per chunk) cost a thread start and a join on every commit and
every chunk, which under load is time the commit waits for the GIL. Here one scheduler thread per
process keeps the deadlines, and a small pool runs what is due: a piece of work never overlaps
itself (its next run is scheduled when the last one ended, as with ``Event.wait`` in a loop) and a
slow one (a store that does not answer) does not hold up the others' deadlines.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["Repeating", "Ticker", "every", "shared_pool"]

log = logging.getLogger("adapter.ticker")


class Repeating:
    """One piece of repeating work; :meth:`cancel` stops the runs not yet started."""

    __slots__ = ("cancelled", "fn", "interval")

    def __init__(self, fn: Callable[[], bool], interval: float) -> None:
        self.fn = fn
        self.interval = interval
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Ticker:
    """A scheduler thread and a pool, both started on first use (and again in a forked child)."""

    def __init__(self, workers: int = 8) -> None:
        self._workers = workers
        self._pid = -1
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Repeating]] = []
        self._order = itertools.count()
        self._pool: ThreadPoolExecutor | None = None

    def every(self, interval: float, fn: Callable[[], bool]) -> Repeating:
        """Run ``fn`` every ``interval`` seconds, the first time after one interval, until cancelled
        or until ``fn`` returns False. An exception from ``fn`` is logged; the runs go on."""
        entry = Repeating(fn, interval)
        self._push(time.monotonic() + interval, entry)
        return entry

    def _push(self, when: float, entry: Repeating) -> None:
        with self._cond:
            if self._pid != os.getpid():  # first use, or a forked child: the threads are not here
                self._start()
            heapq.heappush(self._heap, (when, next(self._order), entry))
            if self._heap[0][2] is entry:
                self._cond.notify()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._heap = []
        self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="ticker-work")
        threading.Thread(target=self._loop, name="ticker", daemon=True).start()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][2].cancelled:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    delay = self._heap[0][0] - time.monotonic()
                    if delay <= 0:
                        entry = heapq.heappop(self._heap)[2]
                        break
                    self._cond.wait(delay)
                pool = self._pool
            if pool is not None:
                pool.submit(self._run, entry)

    def _run(self, entry: Repeating) -> None:
        if entry.cancelled:
            return
        try:
            again = entry.fn()
        except Exception:
            log.exception("repeating background work failed")
            again = True
        if again and not entry.cancelled:
            self._push(time.monotonic() + entry.interval, entry)


_TICKER = Ticker()


def every(interval: float, fn: Callable[[], bool]) -> Repeating:
    """:meth:`Ticker.every` on the process's one ticker."""
    return _TICKER.every(interval, fn)


_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_pools_lock = threading.Lock()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's pool called ``name`` (threads start on first use and are reused; a forked child
    gets a pool of its own)."""
    pid = os.getpid()
    found = _pools.get(name)
    if found is not None and found[0] == pid:
        return found[1]
    with _pools_lock:
        found = _pools.get(name)
        if found is None or found[0] != pid:
            found = (pid, ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name))
            _pools[name] = found
        return found[1]
