"""Feeds ``notifications/resources/updated`` (and, to legacy sessions, ``list_changed``) from the event table.

Every state change writes an event row in the same transaction (see ``adapter.store.tables``), so
polling the table is how a change made by any worker (or by the reconciler, or an operator) reaches
the listen streams this process holds. There is no replay: a stream opened later starts from now,
and a client that lost its stream re-reads the resource.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from adapter.entrypoints.mcp.server import import_uri
from adapter.entrypoints.mcp.tools import run_in_thread
from adapter.services import ImportService

__all__ = ["run_event_feed"]

log = logging.getLogger("adapter.feed")


Publish = Callable[[list[str]], Awaitable[None]]
"""Gets the URIs of one poll's changed imports (``McpGateway.publish_changes``: both eras)."""


async def run_event_feed(service: ImportService, publish: Publish, interval: float = 0.2) -> None:
    """Publish one update per changed import, forever (cancel the task to stop)."""
    follower = await run_in_thread(service.follow_changes)
    while True:
        try:
            handles = await run_in_thread(follower.poll)
            await publish([import_uri(handle) for handle in handles])
        except Exception:  # a database hiccup must not end the feed
            log.warning("event feed poll failed; retrying", exc_info=True)
        await anyio.sleep(interval)
