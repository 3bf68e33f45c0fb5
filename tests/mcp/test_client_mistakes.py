"""A client's mistakes are the client's: answered as such, logged as such, in bounded lines.

* ``arguments: [1]`` (refused by the SDK's own check, -32602) was logged and counted as
  ``internal_error``;
* a 1 MiB tool name made a 1 MiB log line;
* ``ttl_seconds: "10"`` was taken for 10;
* an unauthenticated body nested too deep for ``json.loads``, sent with a version the server does
  not speak, was a 500 with a traceback per request.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"


def request_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "adapter.requests"]


async def tool_calls_counted(server: Any, outcome: str) -> float:
    async with httpx.AsyncClient(timeout=30.0) as http:
        text = (await http.get(server.base_url + "/metrics")).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("adapter_tool_calls_total{") and f'outcome="{outcome}"' in line
    )


@pytest.mark.parametrize("settings_overrides", [{"tokens": None}])  # /metrics open to loopback
async def test_arguments_that_are_not_an_object_are_the_clients_mistake(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapter")
    _, answer = await server.raw(
        "tools/call", {"name": "get_import_status", "arguments": [1]}, token=None, name="get_import_status"
    )
    assert answer["error"]["code"] == -32602
    [line] = request_lines(caplog)
    assert line["outcome"] == "jsonrpc_error:-32602"
    assert await tool_calls_counted(server, "internal_error") == 0
    assert await tool_calls_counted(server, "jsonrpc_error:-32602") == 1


async def test_log_fields_the_client_chooses_are_bounded(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Over a 2025 session, where no header has to repeat the tool name."""
    caplog.set_level(logging.INFO, logger="adapter")
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {server.alice_token}",
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
    huge = "t" * (1024 * 1024)
    async with httpx.AsyncClient(timeout=30.0) as http:
        opened = await http.post(server.url, json=initialize, headers=headers)
        headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        call = {
            "jsonrpc": "2.0",
            "id": "i" * 5000,
            "method": "tools/call",
            "params": {"name": huge, "arguments": {}},
        }
        answer = await http.post(server.url, json=call, headers=headers)
    assert answer.status_code == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "adapter.requests"]
    assert lines and max(len(line) for line in lines) < 600
    [called] = [json.loads(line) for line in lines if '"tools/call"' in line]
    assert called["tool"].startswith("t" * 64) and called["tool"].endswith(f"({len(huge)} chars)")
    assert called["request_id"].endswith("(5000 chars)")


async def test_ttl_seconds_must_be_a_number(server: Any) -> None:
    async with server.client() as client:
        refused = await client.call_tool("begin_import", {"target": "customers", "ttl_seconds": "10"})
        taken = await client.call_tool("begin_import", {"target": "customers", "ttl_seconds": 60})
    assert server.error_text(refused).startswith("validation_error: ttl_seconds:")
    assert server.structured(taken)["status"] == "open"


@pytest.mark.parametrize("settings_overrides", [{"protocol_eras": ["modern"]}])
async def test_an_unauthenticated_malformed_body_is_a_400_and_one_line(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    bodies = [
        b"[" * 100_000 + b"]" * 100_000,  # json.loads: RecursionError
        b'{"jsonrpc":"2.0","id":NaN,"method":"initialize"}',  # was echoed back as invalid JSON
        b'{"jsonrpc":"2.0","id":{"a":1},"method":"initialize","params":{"protocolVersion":[1]}}',
        b"\xff\xfe",
    ]
    async with httpx.AsyncClient(timeout=30.0) as http:
        answers = [
            await http.post(server.url, content=body, headers={"Content-Type": "application/json"})
            for body in bodies
        ]
    for answer in answers:
        assert answer.status_code == 400
        message = answer.json()  # valid JSON, always
        assert message["id"] is None and message["error"]["code"] == -32022
    refused = [r for r in caplog.records if r.name == "adapter.http"]
    assert len(refused) == len(bodies)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
