"""2025-era sessions answer each request in JSON unless it may need the stream (``answers.py``).

Raw JSON-RPC over httpx, so the tests see the content type the server chose: a call that asked for
progress, or of a tool that may ask the user (``commit_import``), is answered over SSE; everything
else in one JSON body. The SDK clients of both languages take both (``test_legacy_era.py``,
``test_node_clients.py``); these tests fail if an SDK upgrade stops the per-request choice.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from adapter.entrypoints.http.answers import needs_stream

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
SSE = "text/event-stream"
JSON = "application/json"


class Session:
    """One 2025-era session over plain httpx."""

    def __init__(self, http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
        self.http, self.url, self.headers = http, url, headers
        self.next_id = 10

    async def request(
        self, method: str, params: dict[str, Any], accept: str = f"{JSON}, {SSE}"
    ) -> tuple[str, dict[str, Any]]:
        """POST one request; returns the answer's content type and its JSON-RPC response."""
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        response = await self.http.post(self.url, json=message, headers={**self.headers, "Accept": accept})
        kind = response.headers["content-type"].split(";")[0]
        if kind == SSE:
            answers = [
                json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")
            ]
            [answer] = [a for a in answers if a.get("id") == self.next_id]
            return kind, answer
        return kind, response.json()

    async def call(self, tool: str, arguments: dict[str, Any], **meta: Any) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        kind, answer = await self.request("tools/call", params)
        return kind, answer["result"]


@contextlib.asynccontextmanager
async def legacy_session(running: Any) -> AsyncIterator[tuple[str, Session]]:
    """Initializes a session; yields the content type of the initialize answer and the session."""
    headers = {
        "Accept": f"{JSON}, {SSE}",
        "Content-Type": JSON,
        "Authorization": f"Bearer {running.alice_token}",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    async with httpx.AsyncClient(timeout=30.0) as http:
        opened = await http.post(running.url, json=initialize, headers=headers)
        assert opened.status_code == 200, opened.text
        headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        initialized = await http.post(
            running.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        assert initialized.status_code == 202
        yield opened.headers["content-type"].split(";")[0], Session(http, running.url, headers)


async def test_calls_that_cannot_need_the_stream_are_answered_in_json(server: Any) -> None:
    async with legacy_session(server) as (initialize_kind, session):
        begun_kind, begun = await session.call("begin_import", {"target": "customers"})
        handle = begun["structuredContent"]["handle"]
        added_kind, added = await session.call("add_records", {"handle": handle, "records": [{"name": "a"}]})
        status_kind, status = await session.call("get_import_status", {"handle": handle})
        list_kind, listed = await session.request("tools/list", {})
    assert initialize_kind == JSON
    assert (begun_kind, added_kind, status_kind, list_kind) == (JSON, JSON, JSON, JSON)
    assert added["structuredContent"]["record_count"] == 1
    assert status["structuredContent"]["record_count"] == 1
    assert any(tool["name"] == "commit_import" for tool in listed["result"]["tools"])


async def test_a_json_answer_needs_only_json_in_accept(server: Any) -> None:
    async with legacy_session(server) as (_, session):
        kind, answer = await session.request("tools/list", {}, accept=JSON)
    assert kind == JSON and answer["result"]["tools"]


async def test_a_call_that_asks_for_progress_is_answered_over_sse(server: Any) -> None:
    async with legacy_session(server) as (_, session):
        _, begun = await session.call("begin_import", {"target": "customers"})
        handle = begun["structuredContent"]["handle"]
        kind, status = await session.call("get_import_status", {"handle": handle}, progressToken="p1")
    assert kind == SSE
    assert status["structuredContent"]["status"] == "open"


async def test_a_commit_which_may_ask_the_user_is_answered_over_sse(server: Any, legacy_engine: Any) -> None:
    async with legacy_session(server) as (_, session):
        _, begun = await session.call("begin_import", {"target": "customers"})
        handle = begun["structuredContent"]["handle"]
        await session.call("add_records", {"handle": handle, "records": [{"name": "a"}, {"name": "b"}]})
        kind, committed = await session.call("commit_import", {"handle": handle})
    assert kind == SSE
    assert committed["structuredContent"]["status"] == "committed"
    assert len(legacy_engine.committed_batches()) == 1


async def test_the_prefixed_commit_tool_is_still_answered_over_sse(serve_kit: Any) -> None:
    async with serve_kit(tool_prefix="erp_") as running, legacy_session(running) as (_, session):
        _, begun = await session.call("erp_begin_import", {"target": "customers"})
        handle = begun["structuredContent"]["handle"]
        await session.call("erp_add_records", {"handle": handle, "records": [{"name": "a"}]})
        kind, committed = await session.call("erp_commit_import", {"handle": handle})
    assert kind == SSE
    assert committed["structuredContent"]["status"] == "committed"


@pytest.mark.parametrize(
    ("body", "streamed"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_import_status"}}', False),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"commit_import"}}', True),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
            b'"params":{"name":"get_import_status","_meta":{"progressToken":7}}}',
            True,
        ),
        (b'{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"imports://x"}}', False),
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', False),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"nonsense"}', True),
        (b"[1, 2]", True),
        (b"not json", True),
    ],
)
def test_only_a_call_that_may_use_the_stream_gets_one(body: bytes, streamed: bool) -> None:
    assert needs_stream(body, frozenset({"commit_import"})) is streamed
