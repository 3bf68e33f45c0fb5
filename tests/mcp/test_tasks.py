"""The Tasks extension (``io.modelcontextprotocol/tasks``) on the wire, over real HTTP.

Requests are POSTed as a 2026-07-28 client writes them (headers, ``_meta`` with the declared
capabilities), so what is checked is what any client someone else wrote would see. Two such
clients drive the same flows in ``test_tasks_fastmcp.py`` (FastMCP 4 with ``fastmcp-tasks``) and
``test_tasks_strands.py`` (strands-agents).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from adapter.bootstrap import build
from adapter.entrypoints.http.app import create_app
from tests.mcp.conftest import Running
from tests.support.constants import ALICE_TOKEN, TIMEOUT
from tests.support.mcp import mcp_headers, modern_meta
from tests.support.servers import serve_in_process

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"
DECLARED = {"extensions": {TASKS: {}}}
WITH_FORMS = {"extensions": {TASKS: {}}, "elicitation": {"form": {}}}


async def stage(server: Any, count: int, token: str | None = None) -> str:
    kwargs = {"token": token} if token else {}
    _, begun = await server.raw(
        "tools/call",
        {"name": "begin_import", "arguments": {"target": "customers"}},
        name="begin_import",
        **kwargs,
    )
    handle = begun["result"]["structuredContent"]["handle"]
    records = [{"id": i} for i in range(count)]
    await server.raw(
        "tools/call",
        {"name": "add_records", "arguments": {"handle": handle, "records": records}},
        name="add_records",
        **kwargs,
    )
    return handle


async def commit(server: Any, handle: str, capabilities: dict[str, Any] = DECLARED, **extra: Any) -> Any:
    _, body = await server.raw(
        "tools/call",
        {"name": "commit_import", "arguments": {"handle": handle}, **extra},
        name="commit_import",
        capabilities=capabilities,
    )
    return body


async def task_call(
    server: Any, method: str, task_id: str, *, token: str | None = None, declared: bool = True
) -> Any:
    kwargs = {"token": token} if token else {}
    _response, body = await server.raw(
        method, {"taskId": task_id}, name=task_id, capabilities=DECLARED if declared else None, **kwargs
    )
    return body


@contextlib.asynccontextmanager
async def listen_frames(
    server: Any, notifications: dict[str, Any], capabilities: dict[str, Any]
) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """A raw ``subscriptions/listen`` stream: its JSON-RPC frames as they arrive."""
    meta = modern_meta(**{"io.modelcontextprotocol/clientCapabilities": capabilities})
    message = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "subscriptions/listen",
        "params": {"notifications": notifications, "_meta": meta},
    }
    headers = mcp_headers("subscriptions/listen", token=ALICE_TOKEN)
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT, read=60.0)) as http,
        http.stream("POST", server.url, json=message, headers=headers) as response,
    ):

        async def frames() -> AsyncIterator[dict[str, Any]]:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    yield json.loads(line[5:].strip())

        yield frames()


async def until_terminal(server: Any, task_id: str) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT):
        while True:
            body = await task_call(server, "tasks/get", task_id)
            task = body["result"]
            if task["status"] in ("completed", "cancelled", "failed"):
                return task
            assert task["status"] == "working"
            await anyio.sleep(0.1)


async def test_discover_advertises_the_extension(server: Any) -> None:
    _, body = await server.raw("server/discover")
    assert TASKS in body["result"]["capabilities"]["extensions"]


async def test_a_commit_of_a_declaring_client_is_a_task_that_completes_with_the_tool_result(
    server: Any, legacy_engine: Any
) -> None:
    handle = await stage(server, 20)
    legacy_engine.update_faults(latency_ms=20)
    created = (await commit(server, handle))["result"]

    assert created["resultType"] == "task"
    assert created["status"] == "working" and created["ttlMs"] > 0 and created["pollIntervalMs"] > 0
    task_id = created["taskId"]
    seen = await task_call(server, "tasks/get", task_id)
    assert seen["result"]["resultType"] == "complete", "resolvable at once: created durably first"
    done = await until_terminal(server, task_id)
    legacy_engine.update_faults(latency_ms=0)

    assert done["status"] == "completed"
    result = done["result"]
    assert result["isError"] is False
    assert (result["structuredContent"]["status"], result["structuredContent"]["operation_id"]) == (
        "committed",
        task_id,
    )
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == 20


async def test_a_client_that_did_not_declare_tasks_gets_the_plain_result_and_no_tasks_methods(
    server: Any,
) -> None:
    handle = await stage(server, 2)
    plain = (await commit(server, handle, capabilities={}))["result"]
    refused = await task_call(server, "tasks/get", plain["structuredContent"]["operation_id"], declared=False)

    assert plain.get("resultType", "complete") == "complete"
    assert plain["structuredContent"]["status"] == "committed"
    assert refused["error"]["code"] == -32021
    assert TASKS in refused["error"]["data"]["requiredCapabilities"]["extensions"]


async def test_a_foreign_task_id_is_refused_exactly_like_an_unknown_one(server: Any) -> None:
    handle = await stage(server, 2)
    task_id = (await commit(server, handle))["result"]["taskId"]
    await until_terminal(server, task_id)

    foreign = await task_call(server, "tasks/get", task_id, token=server.bob_token)
    unknown = await task_call(server, "tasks/get", "0" * 32)
    foreign_cancel = await task_call(server, "tasks/cancel", task_id, token=server.bob_token)

    assert foreign["error"] == unknown["error"]
    assert foreign["error"]["code"] == -32602
    assert foreign_cancel["error"]["code"] == -32602


async def test_cancel_before_commit_leaves_nothing_in_the_legacy_system(
    server: Any, legacy_engine: Any
) -> None:
    handle = await stage(server, 60)
    legacy_engine.update_faults(latency_ms=100)  # six seconds of records
    task_id = (await commit(server, handle))["result"]["taskId"]
    await anyio.sleep(0.5)
    acknowledged = await task_call(server, "tasks/cancel", task_id)
    done = await until_terminal(server, task_id)
    legacy_engine.update_faults(latency_ms=0)
    _, status = await server.raw(
        "tools/call", {"name": "get_import_status", "arguments": {"handle": handle}}, name="get_import_status"
    )

    assert (
        acknowledged["result"] == {"resultType": "complete"}
        or acknowledged["result"]["resultType"] == "complete"
    )
    assert done["status"] == "cancelled"
    assert status["result"]["structuredContent"]["status"] == "open", "the import can be committed again"
    assert legacy_engine.committed_batches() == []


async def test_a_commit_that_needs_confirmation_asks_first_then_becomes_a_task(
    server: Any, legacy_engine: Any
) -> None:
    handle = await stage(server, 3)
    asked = (await commit(server, handle, capabilities=WITH_FORMS))["result"]
    assert asked["resultType"] == "input_required", "the question comes before any task"
    assert legacy_engine.committed_batches() == []
    answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    created = (
        await commit(
            server, handle, capabilities=WITH_FORMS, inputResponses=answer, requestState=asked["requestState"]
        )
    )["result"]

    assert created["resultType"] == "task"
    done = await until_terminal(server, created["taskId"])
    assert done["result"]["structuredContent"]["status"] == "committed"
    assert len(legacy_engine.committed_batches()) == 1


async def test_tasks_list_and_tasks_result_do_not_exist(server: Any) -> None:
    for method in ("tasks/list", "tasks/result"):
        _response, body = await server.raw(method, {"taskId": "x"}, name="x", capabilities=DECLARED)
        assert body["error"]["code"] == -32601, method


async def test_update_is_acknowledged_for_a_known_task_and_refused_for_an_unknown_one(server: Any) -> None:
    handle = await stage(server, 1)
    task_id = (await commit(server, handle))["result"]["taskId"]
    _, known = await server.raw(
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"nope": {}}},
        name=task_id,
        capabilities=DECLARED,
    )
    _, unknown = await server.raw(
        "tasks/update", {"taskId": "f" * 32, "inputResponses": {}}, name="f" * 32, capabilities=DECLARED
    )
    assert known["result"]["resultType"] == "complete"
    assert unknown["error"]["code"] == -32602


async def test_listen_with_task_ids_acknowledges_them_and_sends_the_whole_task_when_it_ends(
    server: Any, legacy_engine: Any
) -> None:
    handle = await stage(server, 30)
    legacy_engine.update_faults(latency_ms=30)
    task_id = (await commit(server, handle))["result"]["taskId"]
    frames: list[dict[str, Any]] = []
    async with listen_frames(server, {"taskIds": [task_id, "0" * 32]}, DECLARED) as stream:
        async for frame in stream:
            frames.append(frame)
            if frame.get("method") == "notifications/tasks" and frame["params"]["status"] != "working":
                break
    legacy_engine.update_faults(latency_ms=0)

    ack = frames[0]
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"]["taskIds"] == [task_id], "only the caller's own task"
    final = frames[-1]["params"]
    assert (final["taskId"], final["status"]) == (task_id, "completed")
    assert final["result"]["structuredContent"]["status"] == "committed"
    assert "io.modelcontextprotocol/subscriptionId" in final["_meta"]


async def test_listen_for_tasks_without_declaring_the_extension_is_refused(server: Any) -> None:
    _response, body = await server.raw("subscriptions/listen", {"notifications": {"taskIds": ["x"]}})
    assert body["error"]["code"] == -32021


async def test_another_worker_answers_tasks_get_from_the_store(server: Any, legacy_engine: Any) -> None:
    """Any worker with the same database and secret answers for a task another one runs."""
    handle = await stage(server, 40)
    legacy_engine.update_faults(latency_ms=50)
    task_id = (await commit(server, handle))["result"]["taskId"]
    other = build(server.kit.settings)
    try:
        async with serve_in_process(create_app(other, run_maintenance=False)) as other_url:
            elsewhere = Running(other_url, other)
            working = (await task_call(elsewhere, "tasks/get", task_id))["result"]
            done = await until_terminal(elsewhere, task_id)
    finally:
        other.close()
    legacy_engine.update_faults(latency_ms=0)
    assert working["status"] == "working" and "records sent" in working["statusMessage"]
    assert done["status"] == "completed"


async def test_a_routing_header_naming_another_task_is_refused_and_an_absent_one_served(server: Any) -> None:
    """``Mcp-Name`` on ``tasks/*`` is the task id (the extension's routing header): the SDK checks it
    only for tools, prompts and resources, so a header naming another task would pass unnoticed."""
    handle = await stage(server, 1)
    task_id = (await commit(server, handle))["result"]["taskId"]
    replies = {}
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        params = {"taskId": task_id, **({"inputResponses": {}} if method == "tasks/update" else {})}
        replies[method] = await server.raw(method, params, name="0" * 32, capabilities=DECLARED)
    _, absent = await server.raw("tasks/get", {"taskId": task_id}, capabilities=DECLARED)

    for method, (response, body) in replies.items():
        assert (response.status_code, body["error"]["code"]) == (400, -32020), method
    assert absent["result"]["taskId"] == task_id, "FastMCP 4.1 sends no Mcp-Name on tasks/*"


async def test_task_answers_carry_exactly_the_extension_fields(server: Any, legacy_engine: Any) -> None:
    """The conformance suite's fixture-bound task checks (its ``slow_compute`` tool), run on
    ``commit_import``: flat envelopes, integer ``ttlMs``/``pollIntervalMs`` and no v1 names, no
    ``requestState`` (not even after the MRTR round), bare ``{resultType: complete}`` acks, an
    idempotent cancel of a finished task, and a legacy ``task`` hint that promotes nothing."""
    handle = await stage(server, 3)
    asked = (await commit(server, handle, capabilities=WITH_FORMS))["result"]
    answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    created = (
        await commit(
            server, handle, capabilities=WITH_FORMS, inputResponses=answer, requestState=asked["requestState"]
        )
    )["result"]
    seen = (await task_call(server, "tasks/get", created["taskId"]))["result"]
    done = await until_terminal(server, created["taskId"])
    cancel_done = (await task_call(server, "tasks/cancel", created["taskId"]))["result"]
    v1_hint = {"ttl": 60000, "pollInterval": 100}
    _, hinted = await server.raw(
        "tools/call",
        {"name": "get_import_status", "arguments": {"handle": handle}, "task": v1_hint},
        name="get_import_status",
        capabilities=DECLARED,
    )

    legacy = {"ttl", "pollInterval", "requestState", "task", "inputRequests", "result", "error"}
    assert created["resultType"] == "task" and not legacy & created.keys(), created
    assert isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)
    assert not {"ttl", "pollInterval", "requestState"} & (seen.keys() | done.keys())
    if seen["status"] == "working":
        assert not {"result", "error"} & seen.keys(), "a working task inlines nothing"
    assert "io.modelcontextprotocol/related-task" not in (done["result"].get("_meta") or {})
    assert cancel_done["resultType"] == "complete" and not {"taskId", "status", "result"} & cancel_done.keys()
    assert hinted["result"].get("resultType", "complete") == "complete" and "taskId" not in hinted["result"]
    assert hinted["result"]["structuredContent"]["status"] == "committed"
    assert len(legacy_engine.committed_batches()) == 1
