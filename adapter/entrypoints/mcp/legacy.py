"""Resource subscriptions of legacy-era (initialize handshake) connections.

A 2026-07-28 client subscribes on its ``subscriptions/listen`` stream (the SDK's subscription bus).
A 2025-era client calls ``resources/subscribe`` and hears ``notifications/resources/updated`` on its
session's standalone stream. This registry is that second path: which connection of this process
subscribed to which import URI. It is transport state only (it dies with the connection, and the
connection's teardown removes it); the import's state stays in the store, and the event feed that
drives the bus drives this registry too, so a change made by any worker reaches both kinds of client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.connection import Connection

from adapter.domain.identity import Principal

__all__ = ["LegacySubscriptions", "connection_of"]

MAX_PER_CONNECTION = 1000

log = logging.getLogger("adapter.legacy_subscriptions")


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The connection a request arrived on.

    ``ServerSession`` is a per-request proxy; the connection behind it is the one object that lives
    as long as the legacy session, so subscriptions are keyed by it (the SDK exposes no public
    accessor on the low-level context).
    """
    connection: Connection = ctx.session._connection
    return connection


class LegacySubscriptions:
    """URI -> the legacy connections of this process that subscribed to it."""

    def __init__(self) -> None:
        self._by_connection: dict[int, tuple[Connection, Principal, set[str]]] = {}
        self.first_arrived: Callable[[], None] | None = None
        """Called when a connection is tracked where none was (``McpGateway.watch_audience``)."""

    def track(self, connection: Connection, principal: Principal) -> set[str]:
        """Remember a legacy connection and its caller until its teardown; its subscribed URIs.

        A session is bound to the credential that opened it (the SDK answers 404 to any other), so
        its principal is the same on every request.
        """
        key = id(connection)
        entry = self._by_connection.get(key)
        if entry is None:
            entry = (connection, principal, set())
            self._by_connection[key] = entry
            connection.exit_stack.callback(self._by_connection.pop, key, None)
            if len(self._by_connection) == 1 and self.first_arrived is not None:
                self.first_arrived()
        return entry[2]

    def subscribe(self, connection: Connection, principal: Principal, uri: str) -> bool:
        """Adds a subscription; False when the connection already holds too many."""
        uris = self.track(connection, principal)
        if uri not in uris and len(uris) >= MAX_PER_CONNECTION:
            return False
        uris.add(uri)
        return True

    def unsubscribe(self, connection: Connection, uri: str) -> None:
        entry = self._by_connection.get(id(connection))
        if entry is not None:
            entry[2].discard(uri)

    def has_connections(self) -> bool:
        """Whether any 2025-era connection is tracked (each hears its owner's list changes)."""
        return bool(self._by_connection)

    def principals(self) -> set[Principal]:
        """The callers with a legacy connection in this process."""
        return {principal for _, principal, _ in self._by_connection.values()}

    async def resource_updated(self, uri: str) -> None:
        """Tell every subscribed connection; a broken one is dropped (the SDK swallows closed streams)."""
        for connection, _, uris in list(self._by_connection.values()):
            if uri in uris:
                await self._send(connection, "notifications/resources/updated", {"uri": uri})

    async def list_changed(self, principal: Principal) -> None:
        """Tell the caller's legacy connections that its resource list changed."""
        for connection, owner, _ in list(self._by_connection.values()):
            if owner == principal:
                await self._send(connection, "notifications/resources/list_changed", None)

    @staticmethod
    async def _send(connection: Connection, method: str, params: dict[str, Any] | None) -> None:
        try:
            await connection.notify(method, params)
        except Exception:  # one broken client must not stop the others
            log.debug("dropped %s for a legacy connection", method, exc_info=True)
