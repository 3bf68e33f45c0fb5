"""What cancels a commit before its answer, per protocol era, over HTTP (docs/state-matrix.md).

2026-07-28: every request is its own POST and closing it is the cancellation. The 2025 era: a
request belongs to its session, not to its connection; a dropped response stream does not cancel
it (the client may resume it), ``notifications/cancelled`` on the session does. Both on the raw
wire with plain httpx, as any client would send it.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from tests.support.mcp import mcp_headers, modern_meta

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
RECORDS = 30
LATENCY_MS = 100  # three seconds of records: inside the wait budget, so the answer is the outcome


async def staged(server: Any) -> str:
    async with server.client() as client:
        return await server.stage(client, [{"id": i} for i in range(RECORDS)])


async def operation_status(server: Any, handle: str) -> str:
    with anyio.fail_after(30):
        while True:
            async with server.client() as client:
                status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
            commits = [o for o in status["operations"] if o["kind"] == "commit"]
            if commits and commits[-1]["status"] != "in_progress":
                return str(commits[-1]["status"])
            await anyio.sleep(0.1)


async def legacy_session(http: httpx.AsyncClient, server: Any) -> dict[str, str]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {server.alice_token}",
    }
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    opened = await http.post(server.url, json=hello, headers=headers)
    headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    await http.post(
        server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    return headers


async def drop_after_progress(
    http: httpx.AsyncClient, url: str, message: dict[str, Any], headers: Any
) -> None:
    """POST the call, read until the first progress notification, then close the stream."""
    async with http.stream("POST", url, json=message, headers=headers) as answer:
        async for line in answer.aiter_lines():
            if line.startswith("data:") and json.loads(line[5:]).get("method") == "notifications/progress":
                return


def commit_call(handle: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "commit_import", "arguments": {"handle": handle}, "_meta": meta},
    }


async def test_a_dropped_2026_request_cancels_its_commit_before_commit(
    server: Any, legacy_engine: Any
) -> None:
    handle = await staged(server)
    legacy_engine.update_faults(latency_ms=LATENCY_MS)
    headers = mcp_headers("tools/call", "commit_import", token=server.alice_token)
    async with httpx.AsyncClient(timeout=30.0) as http:
        await drop_after_progress(
            http, server.url, commit_call(handle, modern_meta(progressToken=1)), headers
        )
    status = await operation_status(server, handle)
    legacy_engine.update_faults(latency_ms=0)
    assert status == "cancelled"
    assert legacy_engine.committed_batches() == []


async def test_a_dropped_2025_response_stream_does_not_cancel_but_cancelled_does(
    server: Any, legacy_engine: Any
) -> None:
    dropped, cancelled = await staged(server), await staged(server)
    legacy_engine.update_faults(latency_ms=LATENCY_MS)
    async with httpx.AsyncClient(timeout=30.0) as http:
        headers = await legacy_session(http, server)
        await drop_after_progress(http, server.url, commit_call(dropped, {"progressToken": 1}), headers)
        kept = await operation_status(server, dropped)

        headers = await legacy_session(http, server)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(
                drop_after_progress, http, server.url, commit_call(cancelled, {"progressToken": 1}), headers
            )
            await anyio.sleep(1.0)
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
            await http.post(server.url, json=note, headers=headers)
        stopped = await operation_status(server, cancelled)
    legacy_engine.update_faults(latency_ms=0)

    assert kept == "succeeded", "the 2025 era: the request goes on without its response stream"
    assert stopped == "cancelled", "notifications/cancelled on the session cancels it"
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == RECORDS
