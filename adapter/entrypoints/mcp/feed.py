"""Feeds ``notifications/resources/updated`` and ``.../list_changed`` from the event table.

Every state change writes an event row in the same transaction (see ``adapter.store.tables``), so
polling the table is how a change made by any worker (or by the reconciler, or an operator) reaches
the listen streams this process holds. There is no replay: a stream opened later starts from now,
and a client that lost its stream re-reads the resource. ``list_changed`` goes only to the streams
of the principal whose import list changed (an import began, expired or was purged).
"""

from __future__ import annotations

import logging

import anyio
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from adapter.entrypoints.mcp.bus import OwnerScopedBus
from adapter.entrypoints.mcp.server import import_uri
from adapter.entrypoints.mcp.tools import run_in_thread
from adapter.services import ImportService
from adapter.services.listing import ImportChange

__all__ = ["publish_changes", "run_event_feed"]

log = logging.getLogger("adapter.feed")


async def run_event_feed(
    service: ImportService, bus: OwnerScopedBus, interval: float = 0.2, *, catch_up_seconds: float = 1.0
) -> None:
    """Publish one update per changed import and one list change per owner, forever (cancel to stop).

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
            await publish_changes(bus, await run_in_thread(follower.poll_changes))
        except Exception:  # a database hiccup must not end the feed
            log.warning("event feed poll failed; retrying", exc_info=True)
        await anyio.sleep(interval)


async def publish_changes(bus: OwnerScopedBus, changes: list[ImportChange]) -> None:
    """One update per changed import; one list change to each owner whose import list changed."""
    for change in changes:
        await bus.publish(ResourceUpdated(uri=import_uri(change.handle)))
    for owner in dict.fromkeys(c.list_owner for c in changes if c.list_owner is not None):
        await bus.publish(ResourcesListChanged(), owner=owner)
