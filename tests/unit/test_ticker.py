"""The process's ticker: repeating work (lease heartbeats, progress pulses) without a thread each."""

from __future__ import annotations

import threading
import time

from adapter.services.ticker import Ticker
from tests.support.wait import wait_until


def test_work_repeats_until_cancelled_and_never_overlaps_itself() -> None:
    ticker = Ticker(workers=4)
    runs: list[float] = []
    running = threading.Lock()
    overlapped = []

    def work() -> bool:
        if not running.acquire(blocking=False):
            overlapped.append(True)
            return True
        try:
            runs.append(time.monotonic())
            time.sleep(0.03)  # longer than the interval
        finally:
            running.release()
        return True

    entry = ticker.every(0.01, work)
    wait_until(lambda: len(runs) >= 4, timeout=5)
    entry.cancel()
    time.sleep(0.1)
    count = len(runs)
    time.sleep(0.1)
    assert len(runs) == count  # nothing after the cancel (beyond a run already started)
    assert not overlapped


def test_work_that_answers_false_stops_and_a_failing_run_does_not() -> None:
    ticker = Ticker(workers=2)
    calls = {"stop": 0, "fail": 0}

    def stop() -> bool:
        calls["stop"] += 1
        return False

    def fail() -> bool:
        calls["fail"] += 1
        raise RuntimeError("boom")

    ticker.every(0.01, stop)
    failing = ticker.every(0.01, fail)
    wait_until(lambda: calls["fail"] >= 3, timeout=5)
    failing.cancel()
    assert calls["stop"] == 1


def test_many_entries_keep_their_own_deadlines() -> None:
    ticker = Ticker(workers=2)
    slow_seen: list[float] = []
    fast_seen: list[float] = []
    ticker.every(0.5, lambda: slow_seen.append(time.monotonic()) is None)
    started = time.monotonic()
    fast = ticker.every(0.02, lambda: fast_seen.append(time.monotonic()) is None)
    wait_until(lambda: len(fast_seen) >= 5, timeout=5)
    fast.cancel()
    assert fast_seen[0] - started < 0.4  # not held behind the slow entry's later deadline
