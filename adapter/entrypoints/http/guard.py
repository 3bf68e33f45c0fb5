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
from collections.abc import Iterable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from adapter.entrypoints.mcp.eras import refusal_error, served_versions

__all__ = ["EraGuard"]

_MAX_PEEK = 1024 * 1024


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


async def _refuse(send: Send, body: bytes, version: str | None, eras: frozenset[str]) -> None:
    request_id: Any = None
    requested = version
    try:
        message = json.loads(body)
        request_id = message.get("id")
        requested = requested or (message.get("params") or {}).get("protocolVersion")
    except (ValueError, AttributeError):
        pass
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
