"""``subscriptions/listen`` streams, with the Tasks extension's ``taskIds`` beside the core kinds.

The SDK's ``ListenHandler`` acknowledges and delivers only the core notification kinds: its ack is
rebuilt from the four core fields (an extension's ``taskIds`` would be dropped from it) and its
delivery knows only the SDK's four event types. The extension asks for ``taskIds`` in the filter and
the ack, and ``notifications/tasks`` frames carrying the whole task. This handler keeps the SDK's
stream rules (the ack is the first frame, every frame stamped with the subscription id, buffered
delivery with a cap that ends a stream whose client stopped reading, graceful close) and uses the
SDK's own event vocabulary and matching (``mcp.shared.subscriptions``) for the core kinds.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.streams.memory
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ServerEvent,
    event_matches,
    event_to_notification,
)
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)

from adapter.entrypoints.mcp.bus import OwnerScopedBus

__all__ = ["ListenStreams", "TaskUpdated"]

log = logging.getLogger("adapter.feed")


@dataclass(frozen=True)
class TaskUpdated:
    """A task (a commit operation) changed: streams that listen for it send ``notifications/tasks``.

    It carries a ``uri`` no stream subscribes to, so the SDK's own matching passes it by."""

    task_id: str

    @property
    def uri(self) -> str:
        return f"task:{self.task_id}"


TaskFrame = Callable[[str, dict[str, Any]], Awaitable[Any | None]]
"""``(task id, _meta)`` -> the ``notifications/tasks`` frame for it (None: no longer the caller's)."""


class ListenStreams:
    """Serves ``subscriptions/listen``: one call is one stream (see the module docstring)."""

    def __init__(
        self, bus: OwnerScopedBus, *, max_streams: int = 1024, max_buffered_events: int = 1024
    ) -> None:
        self._bus = bus
        self._max_streams = max_streams
        self._max_buffered = max_buffered_events
        self._streams: set[anyio.streams.memory.MemoryObjectSendStream[ServerEvent | TaskUpdated]] = set()

    async def __call__(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: SubscriptionsListenRequestParams,
        *,
        task_ids: list[str] | None = None,
        task_frame: TaskFrame | None = None,
    ) -> SubscriptionsListenResult:
        """Serve one stream; ``task_ids`` (already checked: the caller's own) get task frames."""
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen requires a request id")
        if len(self._streams) >= self._max_streams:
            raise MCPError(INTERNAL_ERROR, "Subscription limit reached")
        honored = _honored(params.notifications, task_ids)
        uris = frozenset(honored.resource_subscriptions or ())
        tasks = frozenset(task_ids or ())
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, recv = anyio.create_memory_object_stream[ServerEvent | TaskUpdated](self._max_buffered)

        def deliver(event: ServerEvent | TaskUpdated) -> None:
            wanted = (
                event.task_id in tasks
                if isinstance(event, TaskUpdated)
                else event_matches(honored, uris, event)
            )
            if not wanted:
                return
            try:
                send.send_nowait(event)
            except anyio.ClosedResourceError:
                pass  # closed by close(): the loop below is unwinding
            except anyio.WouldBlock:
                log.warning("listen stream %r backlog full; ending the stream", subscription_id)
                self._streams.discard(send)
                send.close()

        # Subscribed before the ack, so nothing published meanwhile is lost; the ack still goes first.
        unsubscribe = self._bus.subscribe(cast(Callable[[ServerEvent], None], deliver))
        self._streams.add(send)
        try:
            await ctx.session.send_notification(
                SubscriptionsAcknowledgedNotification(
                    params=SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                ),
                related_request_id=subscription_id,
            )
            async for event in recv:
                if isinstance(event, TaskUpdated):
                    frame = await task_frame(event.task_id, meta) if task_frame is not None else None
                    if frame is None:
                        continue
                    await ctx.session.send_notification(frame, related_request_id=subscription_id)
                else:
                    await ctx.session.send_notification(
                        event_to_notification(event, meta), related_request_id=subscription_id
                    )
        finally:
            unsubscribe()
            self._streams.discard(send)
            send.close()
            recv.close()
        return SubscriptionsListenResult(_meta=meta)

    def close(self) -> None:
        """End every stream gracefully: each drains what it holds, then sends its result."""
        for stream in list(self._streams):
            stream.close()


def _honored(requested: SubscriptionFilter, task_ids: list[str] | None) -> SubscriptionFilter:
    """What the ack echoes: the requested core kinds that are true or non-empty, and the task ids."""
    honored = SubscriptionFilter(
        tools_list_changed=True if requested.tools_list_changed else None,
        prompts_list_changed=True if requested.prompts_list_changed else None,
        resources_list_changed=True if requested.resources_list_changed else None,
        resource_subscriptions=list(requested.resource_subscriptions)
        if requested.resource_subscriptions
        else None,
    )
    if task_ids:
        return SubscriptionFilter.model_validate(
            {**honored.model_dump(by_alias=True, exclude_none=True), "taskIds": task_ids}
        )
    return honored
