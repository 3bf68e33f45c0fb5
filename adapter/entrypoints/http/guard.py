"""An ASGI guard in front of the MCP endpoint: only the 2026-07-28 era gets through.

The SDK serves both protocol eras on one endpoint and has no switch to turn the legacy one off. A
request without ``MCP-Protocol-Version`` or with a handshake-era version (an ``initialize``
handshake, say) gets HTTP 400 with JSON-RPC error -32022 naming the supported versions, so a legacy
client learns at once what to speak. GET and DELETE (the legacy stream and session teardown) get 405.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from adapter.entrypoints.mcp.observability import SUPPORTED_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION

__all__ = ["ModernEraGuard"]

_MAX_PEEK = 1024 * 1024


class ModernEraGuard:
    def __init__(self, app: ASGIApp, path: str = "/mcp") -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        if scope["method"] in ("GET", "DELETE"):
            await _respond(send, 405, b"", [(b"allow", b"POST")])
            return
        version = _header(scope, b"mcp-protocol-version")
        if scope["method"] == "POST" and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS):
            body = await _read_body(receive)
            await _refuse(send, body, version)
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


async def _refuse(send: Send, body: bytes, version: str | None) -> None:
    request_id: Any = None
    requested = version
    try:
        message = json.loads(body)
        request_id = message.get("id")
        requested = requested or (message.get("params") or {}).get("protocolVersion")
    except (ValueError, AttributeError):
        pass
    error = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": UNSUPPORTED_PROTOCOL_VERSION,
            "message": "Unsupported protocol version: this server speaks only "
            + ", ".join(SUPPORTED_VERSIONS),
            "data": {"supported": SUPPORTED_VERSIONS, "requested": requested},
        },
    }
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
