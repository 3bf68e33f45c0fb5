"""Progress of a commit that a person can watch.

A commit reports ``0`` of N when it starts, the records handed over after every chunk, and, for
as long as it runs without a new count (opening the legacy session, a slow chunk), a pulse every
``pulse_seconds``: the same count plus a growing fraction below one. The whole part is always the
number of records the legacy system has taken; the fraction only says "still working". Once all N
are handed over there is no pulse: a value above N would read as more than done, so "N of N"
stands while the COMMIT is out.
Values strictly increase (a retried replay that starts again from 0 stays silent until it passes
what was already reported), and nothing is reported once the reporter is closed, so the last
report comes before the result.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

from adapter.services.context import ProgressCallback
from adapter.services.ticker import every

__all__ = ["ProgressReporter"]

log = logging.getLogger("adapter.commit")


class ProgressReporter:
    """Wraps a transport's progress callback; safe to call from the commit and from its pulses
    (which run on the ticker)."""

    def __init__(self, callback: ProgressCallback | None, total: int, pulse_seconds: float) -> None:
        self._callback = callback
        self._total = total
        self._pulse_seconds = pulse_seconds
        self._last = -1.0
        self._beats = 0  # pulses since the last whole count
        self._closed = False
        self._lock = threading.Lock()

    def __call__(self, value: float, total: int | None = None) -> None:
        """Report ``value`` if it is more than the last report (a courtesy: errors are swallowed)."""
        with self._lock:
            if self._callback is None or self._closed or value <= self._last:
                return
            if value == int(value):
                self._beats = 0
            self._last = value
            try:
                self._callback(value, self._total)
            except Exception:  # a gone client must not break the commit
                log.debug("progress callback failed", exc_info=True)

    @contextlib.contextmanager
    def pulsing(self) -> Iterator[None]:
        """While the block runs, pulse between the whole counts, so a person never waits long for a
        sign of life: before the first chunk, during a slow one and while COMMIT is out."""
        if self._callback is None:
            yield
            return
        pulses = every(self._pulse_seconds, self._pulse)  # on the process's ticker: no thread per commit
        try:
            yield
        finally:
            pulses.cancel()

    def _pulse(self) -> bool:
        with self._lock:
            self._beats += 1
            whole, beats = max(int(self._last), 0), self._beats
        if whole >= self._total:
            return True  # every record is handed over: nothing above N of N (the module doc)
        self(whole + beats / (beats + 1))  # stays below whole + 1, so a late pulse is never shown
        return True

    def close(self) -> None:
        """No report after this: the result is about to be returned."""
        with self._lock:
            self._closed = True
