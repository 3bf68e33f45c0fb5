"""What one caller's HTTP requests may cost, charged to that caller, over real HTTP (``http/callers.py``,
``http/shape.py``, ``http/limits.py``).

A body is counted while it streams in: past ``ADAPTER_MAX_JSON_ELEMENTS`` values or
``ADAPTER_MAX_JSON_DEPTH`` levels it is answered 400 with a JSON-RPC error before any parser builds it
(the SDK never sees the request: no request log line). The bytes and values a principal sends are
charged to it; once its budget is spent its next request waits for it (or, for a long debt, is 429
with ``Retry-After``), while other principals go on. The body limit is one limit, the kit's and the
SDK's, answered as a JSON-RPC error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from typing import Any

import httpx
import pytest

from tests.support.mcp import mcp_headers, modern_meta

pytestmark = pytest.mark.anyio

MB = 1024 * 1024
LEGACY = "2025-11-25"


def add_body(records: bytes, handle: str = "imp_" + "x" * 32) -> bytes:
    """A 2026-07-28 ``add_records`` request whose ``records`` array is the raw JSON ``records``."""
    meta = json.dumps(modern_meta())
    return (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_records","arguments":'
        b'{"handle":"' + handle.encode() + b'","records":' + records + b'},"_meta":' + meta.encode() + b"}}"
    )


async def post(running: Any, body: bytes, token: str | None, **extra: str) -> httpx.Response:
    headers = {**mcp_headers("tools/call", "add_records", token=token), **extra}
    async with httpx.AsyncClient(timeout=60.0) as http:
        return await http.post(running.url, content=body, headers=headers)


def nested_empty_arrays(count: int) -> bytes:
    return b"[" + b",".join([b"[]"] * count) + b"]"


def request_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "adapter.requests"]


# --- the shape of a body ---------------------------------------------------------------------------


async def test_a_body_of_many_values_is_refused_before_it_is_parsed(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapter")
    refused = await post(server, add_body(nested_empty_arrays(150_000)), server.alice_token)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == -32600
    assert "ADAPTER_MAX_JSON_ELEMENTS=100000" in error["message"]
    assert request_lines(caplog) == []  # the SDK never got the request
    [line] = [json.loads(r.getMessage()) for r in caplog.records if r.name == "adapter.http"]
    assert line["reason"] == "body_shape" and line["status"] == 400
    assert line["setting"] == "max_json_elements"


async def test_a_body_nested_too_deep_is_refused_naming_the_limit(server: Any) -> None:
    deep = b"[" * 65 + b"{}" + b"]" * 65
    refused = await post(server, add_body(b"[" + deep + b"]"), server.alice_token)
    assert refused.status_code == 400
    assert "ADAPTER_MAX_JSON_DEPTH=64" in refused.json()["error"]["message"]
    # Nesting inside strings is text, not depth: such a record is staged.
    async with server.client() as client:
        handle = server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]
        added = await client.call_tool("add_records", {"handle": handle, "records": [{"t": "[" * 5000}]})
        assert server.structured(added)["accepted"] == 1


async def test_a_2025_session_gets_the_same_answer_not_a_server_error(server: Any) -> None:
    """Before: the per-request answer choice parsed the body with ``json.loads`` and a deep one
    raised RecursionError, a 500 with a traceback."""
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
    async with httpx.AsyncClient(timeout=30.0) as http:
        opened = await http.post(server.url, json=initialize, headers=headers)
        headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        deep = (
            b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":'
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}"
        )
        answer = await http.post(server.url, content=deep, headers=headers)
        again = await http.post(
            server.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers
        )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == -32600
    assert again.status_code == 200  # the session is unharmed


# --- the caller's budget ---------------------------------------------------------------------------


@pytest.mark.parametrize("settings_overrides", [{"max_json_elements_per_second_per_principal": 1000}])
async def test_a_principal_that_spent_its_budget_waits_and_nobody_else_does(server: Any) -> None:
    """About 2 s of debt: alice's next request waits (unread) until it is paid off; bob's is served
    meanwhile."""
    records = json.dumps([{"n": n} for n in range(1500)]).encode()  # about 3000 values
    first = await post(server, add_body(records), server.alice_token)
    assert first.status_code == 200  # admitted while the budget lasted; now in debt
    waiting = asyncio.create_task(post(server, add_body(b"[{}]"), server.alice_token))
    await asyncio.sleep(0.1)
    other = await post(server, add_body(b"[{}]"), server.bob_token)
    assert other.status_code == 200 and not waiting.done()  # bob's own budget
    assert (await asyncio.wait_for(waiting, 30)).status_code == 200


@pytest.mark.parametrize("settings_overrides", [{"max_json_elements_per_second_per_principal": 1000}])
async def test_a_longer_debt_is_refused_at_once_saying_when_to_try_again(server: Any) -> None:
    records = json.dumps([{"n": n} for n in range(4000)]).encode()  # about 8000 values: 7 s of debt
    assert (await post(server, add_body(records), server.alice_token)).status_code == 200
    refused = await post(server, add_body(b"[{}]"), server.alice_token)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == -32029 and error["data"]["code"] == "quota_exceeded"
    assert "ADAPTER_MAX_JSON_ELEMENTS_PER_SECOND_PER_PRINCIPAL=1000" in error["message"]
    assert "try again in" in error["message"]
    assert 5 < error["data"]["retry_after"] <= 8
    assert int(refused.headers["retry-after"]) == math.ceil(error["data"]["retry_after"])


@pytest.mark.parametrize("settings_overrides", [{"max_request_bytes_per_second_per_principal": 4096}])
async def test_request_bytes_are_charged_and_unauthenticated_ones_are_not(server: Any) -> None:
    # Two 30 KB records, 56 KB over the budget: about 14 s of debt, far past the 5 s a request may
    # wait, however long the first one took on a busy machine (with one record, 26 KB over, a first
    # request slower than 1.3 s left less than 5 s and the second waited instead of being refused).
    body = add_body(json.dumps([{"b": "x" * 30_000}, {"b": "x" * 30_000}]).encode())
    for _ in range(5):  # no token: 401 before the body is read, charged to nobody
        assert (await post(server, body, None)).status_code == 401
    assert (await post(server, body, server.alice_token)).status_code == 200
    refused = await post(server, body, server.alice_token)
    assert refused.status_code == 429
    assert "ADAPTER_MAX_REQUEST_BYTES_PER_SECOND_PER_PRINCIPAL=4096" in refused.json()["error"]["message"]


@pytest.mark.parametrize("settings_overrides", [{"max_stage_bytes_per_second_per_principal": 2000}])
async def test_a_staging_rate_refusal_says_when_to_try_again(server: Any) -> None:
    async with server.client() as client:
        handle = server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]
        await client.call_tool("add_records", {"handle": handle, "records": [{"b": "x" * 3000}]})
        refused = await client.call_tool("add_records", {"handle": handle, "records": [{"b": "y"}]})
    text = server.error_text(refused)
    assert text.startswith(
        "quota_exceeded: this principal stages more bytes a second than it may; try again in"
    )
    assert text.endswith("(ADAPTER_MAX_STAGE_BYTES_PER_SECOND_PER_PRINCIPAL=2000)")


# --- one body limit --------------------------------------------------------------------------------


async def test_the_body_limit_is_answered_as_a_json_rpc_error(server: Any) -> None:
    """A declared length above the 4 MiB default: the headers alone get the answer (a raw socket,
    so nothing is sent after them)."""
    host, port = server.base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = "".join(
        f"{k}: {v}\r\n" for k, v in mcp_headers("tools/call", "add_records", token=server.alice_token).items()
    )
    writer.write(
        f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{head}Content-Length: {4 * MB + 1}\r\n\r\n".encode()
    )
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(65536), 30)
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 413 " in status_line
    error = json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]
    assert error["code"] == -32600 and "ADAPTER_MAX_BODY_BYTES=4194304" in error["message"]


@pytest.mark.parametrize("settings_overrides", [{"max_body_bytes": 8 * MB, "max_record_bytes": 6 * MB}])
async def test_a_higher_body_limit_is_the_sdks_limit_too(server: Any) -> None:
    """The SDK refuses above its own limit (4 MiB unless told): the documented setting reaches it."""
    async with server.client() as client:
        handle = server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]
    body = add_body(json.dumps([{"b": "x" * (5 * MB)}]).encode(), handle=handle)
    answer = await post(server, body, server.alice_token)
    assert answer.status_code == 200, answer.text[:200]
    assert (
        json.loads(answer.text.split("data:")[-1] if "data:" in answer.text else answer.text)["result"][
            "structuredContent"
        ]["accepted"]
        == 1
    )


async def test_one_large_body_of_a_principal_at_a_time_and_others_go_on(server: Any) -> None:
    """Alice's first large call is still arriving: her second waits its turn, bob's is served."""
    large = json.dumps([{"b": "x" * 60_000}] * 5).encode()  # 300 KB: a large body
    first_rest = asyncio.Event()

    async def slow_body() -> Any:
        body = add_body(large)
        yield body[:1000]
        await first_rest.wait()
        yield body[1000:]

    async def send(body: Any, token: str, **headers: str) -> httpx.Response:
        async with httpx.AsyncClient(timeout=60.0) as http:
            return await http.post(
                server.url,
                content=body,
                headers={**mcp_headers("tools/call", "add_records", token=token), **headers},
            )

    first = asyncio.create_task(send(slow_body(), server.alice_token))
    await asyncio.sleep(0.5)  # the first holds alice's turn
    second = asyncio.create_task(send(add_body(large), server.alice_token))
    bobs = await asyncio.wait_for(send(add_body(large), server.bob_token), 30)
    assert bobs.status_code == 200
    await asyncio.sleep(0.5)
    assert not second.done()  # waiting for alice's first
    first_rest.set()
    assert (await asyncio.wait_for(first, 30)).status_code == 200
    assert (await asyncio.wait_for(second, 30)).status_code == 200


@pytest.mark.parametrize("settings_overrides", [{"max_requests_per_second_per_principal": 2}])
async def test_requests_a_second_are_charged_too(server: Any) -> None:
    """Two a second, one second's worth at first: alice's fourth request in a row is admitted half
    a second after her first at the earliest; bob's meanwhile at once."""
    started = asyncio.get_running_loop().time()
    for _ in range(3):
        assert (await post(server, add_body(b"[{}]"), server.alice_token)).status_code == 200
    fourth = asyncio.create_task(post(server, add_body(b"[{}]"), server.alice_token))
    assert (await post(server, add_body(b"[{}]"), server.bob_token)).status_code == 200
    assert (await asyncio.wait_for(fourth, 30)).status_code == 200
    assert asyncio.get_running_loop().time() - started >= 0.5
