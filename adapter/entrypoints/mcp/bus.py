"""A subscription bus that can address an event to one principal's listen streams.

The SDK's in-memory bus delivers every event to every stream. ``resources/list`` is per principal,
so "your import list changed" must reach only the streams its owner opened: each stream is
registered with the principal that opened it (:func:`listening_as`, set by the gateway around the
SDK's ``ListenHandler``), and :meth:`OwnerScopedBus.publish` takes an optional ``owner``. Events
without an owner (a resource update, whose URI the stream must have subscribed to, and only an
owner can) still go to every stream, as in the SDK.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import anyio.lowlevel
from mcp.server.subscriptions import ServerEvent

from adapter.domain.identity import Principal

__all__ = ["OwnerScopedBus", "listening_as"]

log = logging.getLogger("adapter.feed")

_LISTENER: ContextVar[Principal | None] = ContextVar("adapter_listener", default=None)

Listener = Callable[[ServerEvent], None]


@contextlib.contextmanager
def listening_as(principal: Principal) -> Iterator[None]:
    """Streams subscribed inside this block belong to ``principal``."""
    token = _LISTENER.set(principal)
    try:
        yield
    finally:
        _LISTENER.reset(token)


class OwnerScopedBus:
    """A ``SubscriptionBus`` (the SDK's protocol) with per-principal delivery."""

    def __init__(self) -> None:
        self._listeners: dict[object, tuple[Principal | None, Listener]] = {}
        self.first_arrived: Callable[[], None] | None = None
        """Called when a stream subscribes to a bus that had none (``McpGateway.watch_audience``)."""

    async def publish(self, event: ServerEvent, *, owner: Principal | None = None) -> None:
        """Deliver ``event`` to every stream, or with ``owner`` only to the streams that principal opened."""
        for who, listener in list(self._listeners.values()):
            if owner is not None and who != owner:
                continue
            try:
                listener(event)
            except Exception:  # one bad listener must not starve the others
                log.exception("subscription listener raised; continuing")
        await anyio.lowlevel.checkpoint()

    def has_listeners(self) -> bool:
        return bool(self._listeners)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        token = object()
        first = not self._listeners
        self._listeners[token] = (_LISTENER.get(), listener)
        if first and self.first_arrived is not None:
            self.first_arrived()

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe
