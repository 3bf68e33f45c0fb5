"""Which MCP protocol eras this server serves, and the refusal of the one it does not.

Two eras share one endpoint (and one stdio connection kind):

* ``modern``: 2026-07-28, every request carries its own envelope; no session, no handshake.
* ``legacy``: the ``initialize`` handshake of 2024-11-05 .. 2025-11-25; the session holds only
  transport state (negotiated version, capabilities, open streams), never an import's state.

``ADAPTER_PROTOCOL_ERAS`` chooses the eras (default both). A request of an era that is not served
gets JSON-RPC -32022 naming the served versions: over HTTP from ``adapter.entrypoints.http.guard``
before the SDK sees it, over stdio from :class:`EraGate`. On stdio the SDK fixes a connection's era
with its first request; a legacy connection of a modern-only server gets every request refused and
its notifications dropped, so a refused ``initialize`` followed by ``notifications/initialized``
never turns into a half-served session.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

__all__ = [
    "ERA_VERSIONS",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "EraGate",
    "era_of",
    "refusal_error",
    "served_versions",
]

UNSUPPORTED_PROTOCOL_VERSION = -32022

# Newest first, so the first entry is what a client should try.
ERA_VERSIONS: dict[str, tuple[str, ...]] = {
    "modern": tuple(sorted(MODERN_PROTOCOL_VERSIONS, reverse=True)),
    "legacy": tuple(sorted(HANDSHAKE_PROTOCOL_VERSIONS, reverse=True)),
}

log = logging.getLogger("adapter.eras")


def era_of(protocol_version: str | None) -> str:
    """``modern`` for a 2026-07-28 request, ``legacy`` for anything on a handshake connection."""
    return "modern" if protocol_version in MODERN_PROTOCOL_VERSIONS else "legacy"


def served_versions(eras: Iterable[str]) -> list[str]:
    """The protocol versions of the served eras, modern first (the order clients should prefer)."""
    chosen = set(eras)
    return [version for era in ("modern", "legacy") if era in chosen for version in ERA_VERSIONS[era]]


def refusal_error(supported: list[str], requested: str | None) -> dict[str, Any]:
    """The JSON-RPC error object for a version this server does not serve.

    The message itself names the versions, because several clients show only the message.
    """
    return {
        "code": UNSUPPORTED_PROTOCOL_VERSION,
        "message": f"Unsupported protocol version {requested or '(none)'}: this server speaks "
        + ", ".join(supported),
        "data": {"supported": supported, "requested": requested},
    }


class EraGate:
    """Server middleware: refuses every request of an era that is not served (stdio's guard).

    Notifications of such a connection are dropped, so ``notifications/initialized`` after a refused
    ``initialize`` cannot mark the connection initialized.
    """

    def __init__(self, eras: Iterable[str]) -> None:
        self.eras = frozenset(eras)
        self.supported = served_versions(self.eras)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if era_of(ctx.protocol_version) in self.eras:
            return await call_next(ctx)
        if ctx.request_id is None:
            log.debug("dropped %s of an era not served", ctx.method)
            return None
        requested = ctx.protocol_version
        if ctx.method == "initialize":
            requested = (ctx.params or {}).get("protocolVersion")
        error = refusal_error(self.supported, requested if isinstance(requested, str) else None)
        raise MCPError(error["code"], error["message"], data=error["data"])
