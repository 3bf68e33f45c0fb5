"""MCP on the wire as the 2026-07-28 revision writes it: headers, ``_meta``, and SSE responses."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.constants import PROTOCOL_VERSION

LEGACY_INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "legacy-client", "version": "1.0"},
    },
}
"""A pre-2026 handshake, which the server refuses naming the versions it speaks."""


def mcp_headers(method: str, name: str | None = None, *, token: str | None = None) -> dict[str, str]:
    """The HTTP headers of one request (``Mcp-Name`` for tools/call and the like)."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def modern_meta(**extra: Any) -> dict[str, Any]:
    """The per-request ``_meta`` that replaces the old handshake."""
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        **extra,
    }


def sse_messages(text: str) -> list[Any]:
    """The JSON messages of an SSE body, one per ``data:`` line, in order."""
    return [json.loads(line[5:].strip()) for line in text.splitlines() if line.startswith("data:")]


def parse_body(response: httpx.Response) -> Any:
    """The JSON-RPC answer of a response, JSON or SSE (the last message carrying an ``id``);
    ``None`` for an empty body, the text for one that is not JSON."""
    if not response.content:
        return None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        answers = [message for message in sse_messages(response.text) if "id" in message]
        return answers[-1] if answers else None
    try:
        return response.json()
    except ValueError:
        return response.text
