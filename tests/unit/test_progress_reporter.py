"""The commit's progress reporter: pulses say "still working" between counts, never past N of N."""

from __future__ import annotations

import time

from adapter.services.progress import ProgressReporter


def _pulse_for(reporter: ProgressReporter, seconds: float) -> None:
    with reporter.pulsing():
        time.sleep(seconds)


def test_pulses_between_counts_stay_below_the_next_whole_count() -> None:
    seen: list[float] = []
    reporter = ProgressReporter(lambda value, total: seen.append(value), total=3, pulse_seconds=0.01)
    reporter(1)
    _pulse_for(reporter, 0.2)
    assert seen[0] == 1 and len(seen) > 2
    assert all(1 < value < 2 for value in seen[1:])
    assert seen == sorted(set(seen))


def test_once_every_record_is_handed_over_no_pulse_goes_above_the_total() -> None:
    seen: list[tuple[float, int | None]] = []
    reporter = ProgressReporter(lambda value, total: seen.append((value, total)), total=3, pulse_seconds=0.01)
    reporter(3)
    _pulse_for(reporter, 0.2)  # the COMMIT is out
    assert seen == [(3, 3)]


def test_nothing_is_reported_after_close() -> None:
    seen: list[float] = []
    reporter = ProgressReporter(lambda value, total: seen.append(value), total=3, pulse_seconds=0.01)
    reporter(1)
    reporter.close()
    _pulse_for(reporter, 0.1)
    reporter(2)
    assert seen == [1]
