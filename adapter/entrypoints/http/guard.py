"""An ASGI guard in front of the MCP endpoint: only the served protocol eras get through.

The SDK serves both protocol eras on one endpoint and has no switch to turn either off. This guard
refuses what ``ADAPTER_PROTOCOL_ERAS`` does not serve, before the SDK sees it: a POST whose
``MCP-Protocol-Version`` names a version of an era not served (or no known version at all), or that
has no such header while the legacy era is off (an ``initialize`` handshake, say), gets HTTP 400 with
JSON-RPC error -32022 naming the supported versions, so a client learns at once what to speak. With
the legacy era off, GET and DELETE (the legacy stream and session teardown) get 405.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from pydantic_core import from_json
from starlette.types import ASGIApp, Receive, Scope, Send

from adapter.entrypoints.http.shape import JsonShape, ShapeExceeded
from adapter.entrypoints.mcp.eras import refusal_error, served_versions

__all__ = ["EraGuard"]

# What is read of a refused body (before authentication) to find its id and protocol version: an
# initialize is a few hundred bytes. The rest is read and dropped; the shape of what is kept is
# counted before it is parsed, so no body of any shape costs more than this much parsing.
_MAX_PEEK = 64 * 1024
_PEEK_SHAPE = (32, 4096)  # depth, values
_MAX_FIELD = 100  # characters of a refused version echoed back

log = logging.getLogger("adapter.http")


class EraGuard:
    def __init__(self, app: ASGIApp, eras: Iterable[str], path: str = "/mcp") -> None:
        self.app = app
        self.path = path
        self.eras = frozenset(eras)
        self.supported = served_versions(self.eras)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        legacy = "legacy" in self.eras
        if scope["method"] in ("GET", "DELETE") and not legacy:
            await _respond(send, 405, b"", [(b"allow", b"POST")])
            return
        version = _header(scope, b"mcp-protocol-version")
        refused = version not in self.supported if version is not None else not legacy
        if scope["method"] == "POST" and refused:
            body = await _read_body(receive)
            await _refuse(send, body, version, self.eras)
            return
        await self.app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= _MAX_PEEK:
            chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _peek(body: bytes) -> tuple[Any, str | None]:
    """(request id, ``params.protocolVersion``) of a refused body, each only when well-formed:
    anything else (not JSON, too deep, too many values, odd types) gives None."""
    try:
        JsonShape(*_PEEK_SHAPE).feed(body)
        message = from_json(body, allow_inf_nan=False)
    except (ValueError, ShapeExceeded):
        return None, None
    if not isinstance(message, dict):
        return None, None
    request_id = message.get("id")
    if (
        not isinstance(request_id, str | int)
        or isinstance(request_id, bool)
        or len(str(request_id)) > _MAX_FIELD
    ):
        request_id = None
    params = message.get("params")
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    return request_id, version[:_MAX_FIELD] if isinstance(version, str) else None


async def _refuse(send: Send, body: bytes, version: str | None, eras: frozenset[str]) -> None:
    request_id, in_body = _peek(body)
    requested = version[:_MAX_FIELD] if version is not None else in_body
    # One line per refusal, never what the client sent (the version it asked for is its input).
    log.info(json.dumps({"event": "http.refused", "status": 400, "reason": "protocol_version"}))
    error = {"jsonrpc": "2.0", "id": request_id, "error": refusal_error(eras, requested)}
    await _respond(send, 400, json.dumps(error).encode(), [(b"content-type", b"application/json")])


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
