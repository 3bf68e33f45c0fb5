"""Feeds ``notifications/resources/updated`` from the event table.

Every state change writes an event row in the same transaction (see ``adapter.store.tables``), so
polling the table is how a change made by any worker (or by the reconciler, or an operator) reaches
the listen streams this process holds. There is no replay: a stream opened later starts from now,
and a client that lost its stream re-reads the resource.
"""

from __future__ import annotations

import logging

import anyio
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.subscriptions import ResourceUpdated

from adapter.entrypoints.mcp.server import import_uri
from adapter.entrypoints.mcp.tools import run_in_thread
from adapter.services import ImportService

__all__ = ["run_event_feed"]

log = logging.getLogger("adapter.feed")


async def run_event_feed(
    service: ImportService, bus: SubscriptionBus, interval: float = 0.2, *, catch_up_seconds: float = 1.0
) -> None:
    """Publish one update per changed import, forever (cancel the task to stop).

    On PostgreSQL the feed is woken by NOTIFY (``feed_pg.py``), so several workers hear each other at
    once; on SQLite (one process) it polls every ``interval``.
    """
    if service.ctx.store.engine.dialect.name == "postgresql":
        from adapter.entrypoints.mcp.feed_pg import run_pg_event_feed

        await run_pg_event_feed(service, bus, catch_up_seconds=catch_up_seconds)
        return
    follower = await run_in_thread(service.follow_changes)
    while True:
        try:
            handles = await run_in_thread(follower.poll)
            for handle in handles:
                await bus.publish(ResourceUpdated(uri=import_uri(handle)))
        except Exception:  # a database hiccup must not end the feed
            log.warning("event feed poll failed; retrying", exc_info=True)
        await anyio.sleep(interval)
