"""Feeds ``notifications/resources/updated`` and ``.../list_changed`` from the event table.

Every state change writes an event row in the same transaction (see ``adapter.store.tables``), so
reading the table is how a change made by any worker (or by the reconciler, or an operator) reaches
the streams this process holds: listen streams (2026-07-28) and 2025-era sessions alike, through
``McpGateway.publish_changes``. There is no replay: a stream opened later starts from now, and a
client that lost its stream re-reads the resource. ``list_changed`` goes only to the streams of the
principal whose import list changed (an import began, expired or was purged).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from adapter.entrypoints.mcp.tools import run_in_thread
from adapter.services import ImportService
from adapter.services.listing import ImportChange

__all__ = ["Arrivals", "Listening", "Publish", "run_event_feed"]

log = logging.getLogger("adapter.feed")

Publish = Callable[[list[ImportChange]], Awaitable[None]]
"""Gets one read's changed imports (``McpGateway.publish_changes``: both eras)."""

Listening = Callable[[], bool]
"""Whether anyone could hear a change now (``McpGateway.has_audience``)."""

Arrivals = Callable[[Callable[[], None]], None]
"""Registers what to call when a first listener arrives (``McpGateway.watch_audience``)."""


async def run_event_feed(
    service: ImportService,
    publish: Publish,
    interval: float = 0.2,
    *,
    catch_up_seconds: float = 1.0,
    listening: Listening | None = None,
    arrivals: Arrivals | None = None,
) -> None:
    """Publish the changed imports, forever (cancel the task to stop).

    On PostgreSQL the feed is woken by NOTIFY (``feed_pg.py``), so several workers hear each other at
    once; on SQLite (one process) it polls every ``interval``. While ``listening()`` is false the
    reads only move past the new events (``ChangeFollower.poll_changes``).
    """
    if service.ctx.store.engine.dialect.name == "postgresql":
        from adapter.entrypoints.mcp.feed_pg import run_pg_event_feed

        await run_pg_event_feed(
            service, publish, catch_up_seconds=catch_up_seconds, listening=listening, arrivals=arrivals
        )
        return
    follower = await run_in_thread(service.follow_changes)
    while True:
        try:
            await publish(await run_in_thread(follower.poll_changes, listening))
        except Exception:  # a database hiccup must not end the feed
            log.warning("event feed poll failed; retrying", exc_info=True)
        await anyio.sleep(interval)
