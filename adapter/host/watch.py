"""A listen stream per (server, principal) that keeps the host's cache honest.

Events invalidate what they name; a tools-list change triggers a rediscovery (diffed by the registry).
When the stream is lost the host cannot know what it missed (there is no replay), so it drops every
cached result of that server, counts a gap, and listens again after a bounded back-off: the next read
goes to the source instead of trusting a history that may have a hole. Once listening again it reads
the tool list from the source too (diffed: a tool redeployed in the gap loses its approval), so no
call goes out under the contract of before the gap.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated, ToolsListChanged

from adapter.host.connection import Principal

if TYPE_CHECKING:
    from adapter.host.host import Host

__all__ = ["Watch", "watch"]

log = logging.getLogger("adapter.host.watch")


@dataclass
class Watch:
    server: str
    principal: Principal
    uris: tuple[str, ...]
    task: asyncio.Task[None] = field(init=False)
    listening: asyncio.Event = field(default_factory=asyncio.Event)
    gaps: int = 0
    events: int = 0
    supported: bool = True
    rereads: int = 0  # tool lists re-read after a gap


def watch(
    host: Host, server: str, principal: Principal, uris: tuple[str, ...] = (), attempts: int = 20
) -> Watch:
    """Start listening in the background; ``host.aclose()`` stops it."""
    w = Watch(server, principal, uris)
    w.task = asyncio.create_task(_run(host, w, attempts))
    host.watches.append(w)
    return w


async def _run(host: Host, w: Watch, attempts: int) -> None:
    delay = 0.1
    for _ in range(attempts):
        try:
            async with host.connect(w.server, w.principal) as conn:
                if conn.legacy:  # a handshake-era server: nothing to listen to, caches rely on ttlMs
                    w.supported = False
                    return
                async with conn.client.listen(
                    tools_list_changed=True, resources_list_changed=True, resource_subscriptions=list(w.uris)
                ) as subscription:
                    if w.gaps:
                        await host.discover_server(w.server, w.principal)
                        w.rereads += 1
                    w.listening.set()
                    delay = 0.1
                    async for event in subscription:
                        w.events += 1
                        await _apply(host, w, event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # lost stream or unreachable server: what happened meanwhile is unknown
            log.info("listen stream to %s lost: %s", w.server, type(exc).__name__)
        w.listening.clear()
        w.gaps += 1
        host.cache.invalidate(w.server)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


async def _apply(host: Host, w: Watch, event: object) -> None:
    if isinstance(event, ResourceUpdated):
        host.cache.invalidate(w.server, target=event.uri)
    elif isinstance(event, ResourcesListChanged):
        host.cache.invalidate(w.server, method="resources/list")
    elif isinstance(event, ToolsListChanged):
        await host.discover_server(w.server, w.principal)
