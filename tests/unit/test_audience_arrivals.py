"""A process's first listener wakes the change feed at once (``McpGateway.watch_audience``): the feed
then takes the audience lock, so the other workers announce their changes to it (``feed_pg.py``)."""

from __future__ import annotations

import contextlib
from typing import Any

from adapter.domain.identity import Principal
from adapter.entrypoints.mcp.bus import OwnerScopedBus
from adapter.entrypoints.mcp.legacy import LegacySubscriptions


def test_the_bus_reports_each_first_stream_of_an_empty_bus() -> None:
    bus = OwnerScopedBus()
    arrivals: list[int] = []
    bus.first_arrived = lambda: arrivals.append(len(arrivals))

    leave_first = bus.subscribe(lambda _event: None)
    leave_second = bus.subscribe(lambda _event: None)
    assert arrivals == [0]  # the second stream found one there
    leave_first()
    leave_second()
    bus.subscribe(lambda _event: None)
    assert arrivals == [0, 1]  # the bus was empty again


class _Connection:
    """What ``LegacySubscriptions`` uses of the SDK's ``Connection``: its exit stack, closed at teardown."""

    def __init__(self) -> None:
        self.exit_stack = contextlib.ExitStack()


def test_legacy_sessions_report_the_first_connection_of_an_empty_process() -> None:
    sessions = LegacySubscriptions()
    arrivals: list[int] = []
    sessions.first_arrived = lambda: arrivals.append(len(arrivals))
    alice = Principal(subject="alice", tenant="acme")
    first: Any = _Connection()
    second: Any = _Connection()

    sessions.track(first, alice)
    sessions.track(first, alice)  # the same connection again
    sessions.track(second, alice)
    assert arrivals == [0]
    first.exit_stack.close()
    second.exit_stack.close()
    assert not sessions.has_connections()
    sessions.track(first, alice)
    assert arrivals == [0, 1]
