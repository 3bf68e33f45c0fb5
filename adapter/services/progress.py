"""Progress of a commit that a person can watch.

A commit reports ``0`` of N when it starts, the records handed over after every chunk, and, while
the legacy system is still working on a chunk, a pulse every ``pulse_seconds``: the same count plus
a growing fraction below one. The whole part is always the number of records the legacy system
has taken; the fraction only says "still working". Values strictly increase (a retried replay that
starts again from 0 stays silent until it passes what was already reported), and nothing is
reported once the reporter is closed, so the last report comes before the result.
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
        self._closed = False
        self._lock = threading.Lock()

    def __call__(self, value: float, total: int | None = None) -> None:
        """Report ``value`` if it is more than the last report (a courtesy: errors are swallowed)."""
        with self._lock:
            if self._callback is None or self._closed or value <= self._last:
                return
            self._last = value
            try:
                self._callback(value, self._total)
            except Exception:  # a gone client must not break the commit
                log.debug("progress callback failed", exc_info=True)

    @contextlib.contextmanager
    def in_flight(self, sent: int) -> Iterator[None]:
        """While a chunk after ``sent`` records is with the legacy system, pulse below ``sent + 1``."""
        if self._callback is None:
            yield
            return
        beats = 0

        def pulse() -> bool:
            nonlocal beats
            beats += 1
            self(sent + beats / (beats + 1))  # stays below sent + 1, so a late pulse is never shown
            return True

        pulses = every(self._pulse_seconds, pulse)  # on the process's ticker: no thread per chunk
        try:
            yield
        finally:
            pulses.cancel()

    def close(self) -> None:
        """No report after this: the result is about to be returned."""
        with self._lock:
            self._closed = True
