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
from collections.abc import Iterable, Mapping
from typing import Any

import anyio.abc
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import PROTOCOL_VERSION_META_KEY, ErrorData, JSONRPCError, JSONRPCRequest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

__all__ = [
    "ERA_VERSIONS",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "EraGate",
    "answer_versions",
    "era_of",
    "lock_stdio_era",
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


def answer_versions(eras: Iterable[str], requested: str | None) -> list[str]:
    """The versions ``error.data.supported`` lists for a refused request.

    The list a client can switch to: the other era's versions for a request of an era not served,
    and for a version nobody knows the modern ones when served (a 2026-07-28 client compares the
    list with ``server/discover``'s ``supportedVersions``, which names modern versions only).
    """
    chosen = set(eras)
    if requested in ERA_VERSIONS["legacy"] and "modern" in chosen:
        return list(ERA_VERSIONS["modern"])
    if requested in ERA_VERSIONS["modern"] and "legacy" in chosen:
        return list(ERA_VERSIONS["legacy"])
    return served_versions(["modern"] if "modern" in chosen else chosen)


def refusal_error(eras: Iterable[str], requested: str | None) -> dict[str, Any]:
    """The JSON-RPC error object for a version this server does not serve.

    The message names every served version (several clients show only the message), the data the
    versions of :func:`answer_versions`.
    """
    chosen = frozenset(eras)
    named = ", ".join(ERA_VERSIONS["modern"]) if "modern" in chosen else ""
    if "legacy" in chosen:
        handshake = "the initialize handshake at " + ", ".join(ERA_VERSIONS["legacy"])
        named = f"{named} and {handshake}" if named else handshake
    return {
        "code": UNSUPPORTED_PROTOCOL_VERSION,
        "message": f"Unsupported protocol version {requested or '(none)'}: this server speaks {named}",
        "data": {"supported": answer_versions(chosen, requested), "requested": requested},
    }


class EraGate:
    """Server middleware: refuses every request of an era that is not served (stdio's guard).

    Notifications of such a connection are dropped, so ``notifications/initialized`` after a refused
    ``initialize`` cannot mark the connection initialized.
    """

    def __init__(self, eras: Iterable[str]) -> None:
        self.eras = frozenset(eras)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if era_of(ctx.protocol_version) in self.eras:
            return await call_next(ctx)
        if ctx.request_id is None:
            log.debug("dropped %s of an era not served", ctx.method)
            return None
        requested: object = ctx.protocol_version
        if ctx.method == "initialize":
            requested = (ctx.params or {}).get("protocolVersion")
        error = refusal_error(self.eras, requested if isinstance(requested, str) else None)
        raise MCPError(error["code"], error["message"], data=error["data"])


def _request_era(request: JSONRPCRequest) -> str:
    """The era a request belongs to, by the SDK's rule: only a non-``initialize`` request carrying the
    2026-07-28 envelope (``_meta`` protocol version) is modern."""
    meta = (request.params or {}).get("_meta")
    enveloped = isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta
    return "modern" if enveloped and request.method != "initialize" else "legacy"


async def lock_stdio_era(
    read: ReadStream[SessionMessage | Exception],
    forward: anyio.abc.ObjectSendStream[SessionMessage | Exception],
    write: WriteStream[SessionMessage],
) -> None:
    """Relay a stdio connection's messages to the server, refusing a 2026-07-28 request on a
    connection that opened with ``initialize`` with -32022 naming the handshake versions.

    The SDK fixes the era with the first request too, but answers that case with a bare -32600 that
    names no version; the other case (``initialize`` after a modern opening) it already answers with
    -32022 naming 2026-07-28. Closing ``forward`` at end of input ends the server as before.
    """
    opened: str | None = None
    async with forward:
        async for item in read:
            if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                era = _request_era(item.message)
                opened = opened or era
                if opened == "legacy" and era == "modern":
                    await write.send(SessionMessage(_mixed_era_error(item.message)))
                    continue
            await forward.send(item)


def _mixed_era_error(request: JSONRPCRequest) -> JSONRPCError:
    legacy = list(ERA_VERSIONS["legacy"])
    message = (
        "Unsupported protocol version 2026-07-28 on this connection: it opened with initialize and "
        f"speaks the handshake versions ({', '.join(legacy)}); use a new connection for 2026-07-28"
    )
    data = {"supported": legacy, "requested": "2026-07-28"}
    error = ErrorData(code=UNSUPPORTED_PROTOCOL_VERSION, message=message, data=data)
    return JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
