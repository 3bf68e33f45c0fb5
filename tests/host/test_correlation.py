"""Negative cases of the request builder: responses for another request id, server or protocol
version are rejected, and the declared capabilities are exactly what the host implements.

The misbehaving server is a few lines of Starlette served over real HTTP: it answers like a 2026
server but, on request, with a wrong id, another server's identity, another protocol version or a
result of another era, as a JSON body or as an SSE stream (the SDK's SSE path puts the request's own
id on whatever response it finds, so only the wire guard can tell). It also has a status tool of its
own, for a host-supplied :class:`StatusResolver` that is not ours.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from adapter.host import (
    AuditLog,
    CallState,
    ConsentRequest,
    Host,
    Policy,
    Principal,
    ServerRule,
    ServerSpec,
    StatusVerdict,
)
from tests.host.conftest import HTTP_DECISION

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", "acme")
INFO = {"io.modelcontextprotocol/serverInfo": {"name": "fake", "version": "1.0"}}
TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {
        "name": "touch",
        "inputSchema": {"type": "object", "properties": {"idempotency_key": {"type": "string"}}},
    },
    {"name": "login", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "touch_status", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
]
APPLIED: list[str] = []  # the idempotency keys of every touch the fake server applied


def login(arguments: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Asks for a URL-mode sign-in; the answer must come back with the byte-exact requestState."""
    url = arguments["url"]
    answers = params.get("inputResponses")
    if not answers:
        question = {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": "Sign in", "url": url},
        }
        return {
            "resultType": "input_required",
            "inputRequests": {"signin": question},
            "requestState": "s:" + url,
        }
    assert params.get("requestState") == "s:" + url, "requestState came back altered"
    return {"resultType": "complete", "content": [{"type": "text", "text": answers["signin"]["action"]}]}


RECEIVED: list[dict[str, Any]] = []  # the _meta of every tools/call the fake server got


def touch_status(arguments: dict[str, Any]) -> dict[str, Any]:
    """The fake server's own status tool: has a touch with this key been applied, and how often."""
    count = APPLIED.count(arguments["key"])
    return {"content": [{"type": "text", "text": str(count)}], "structuredContent": {"applied": count}}


async def mcp_endpoint(request: Request) -> Response:
    message = await request.json()
    method, params, rpc_id = message["method"], message.get("params") or {}, message["id"]
    arguments = params.get("arguments") or {}
    if method == "tools/call":
        RECEIVED.append(params.get("_meta") or {})
    result: dict[str, Any] = {"resultType": "complete", "_meta": dict(INFO)}
    headers: dict[str, str] = {}
    if method == "server/discover":
        result.update(
            supportedVersions=["2026-07-28"], capabilities={"tools": {}}, ttlMs=0, cacheScope="private"
        )
    elif method == "tools/list":
        result.update(tools=TOOLS, ttlMs=0, cacheScope="private")
    elif method == "tools/call" and params["name"] == "login":
        result.update(login(params["arguments"], params))
    elif method == "tools/call" and params["name"] == "touch_status":
        result.update(touch_status(arguments))
    elif method == "tools/call":
        mode = arguments.get("mode", "ok")
        if params["name"] == "touch" and mode != "id-unapplied":
            APPLIED.append(arguments.get("idempotency_key", ""))
        result["content"] = [{"type": "text", "text": "done"}]
        if mode in ("id", "id-unapplied"):
            rpc_id = rpc_id + 1000 if isinstance(rpc_id, int) else f"{rpc_id}-other"
        elif mode == "server":
            result["_meta"] = {"io.modelcontextprotocol/serverInfo": {"name": "intruder", "version": "1"}}
        elif mode == "version":
            headers["MCP-Protocol-Version"] = "2025-11-25"
        elif mode == "meta-version":
            result["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2025-06-18"
        elif mode == "era":
            del result["resultType"]
    body = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
    if arguments.get("sse"):  # the same answer as one event of an SSE stream
        event = f"event: message\ndata: {json.dumps(body)}\n\n"
        return Response(event, media_type="text/event-stream", headers=headers)
    return JSONResponse(body, headers=headers)


@contextlib.asynccontextmanager
async def fake_server() -> AsyncIterator[str]:
    app = Starlette(routes=[Route("/mcp", mcp_endpoint, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.should_exit = True


async def allow(request: ConsentRequest) -> bool:
    return True


def host_for(url: str, **kwargs: Any) -> Host:
    spec = ServerSpec("fake", url, {ALICE: "token-a"}, transport=HTTP_DECISION)
    return Host(
        [spec], Policy({"fake": ServerRule(principals={"alice"})}), consent=allow, audit=AuditLog(), **kwargs
    )


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("id", "response for request id"),
        ("server", "response from server 'intruder'"),
        ("version", "response for protocol version 2025-11-25"),
        ("meta-version", "response for protocol version 2025-06-18"),
        ("era", "another protocol era"),
    ],
)
async def test_a_response_for_another_request_server_or_version_is_rejected(
    mode: str, reason: str, sse: bool
) -> None:
    async with fake_server() as url, host_for(url) as host:
        await host.discover(ALICE)
        fine = await host.call(ALICE, "fake.echo", {"mode": "ok", "sse": sse})
        assert fine.state is CallState.COMPLETED, fine.error
        read = await host.call(ALICE, "fake.echo", {"mode": mode, "sse": sse})
        assert read.state is CallState.FAILED and reason in (read.error or ""), read.history
        assert read.result is None, "nothing from a rejected response reaches the application"
        effect = await host.call(ALICE, "fake.touch", {"mode": mode, "sse": sse})
        # Our request was sent and its own answer never came: for an effect that is unknown, not failed.
        assert effect.state is CallState.OUTCOME_UNKNOWN and reason in (effect.error or "")
        assert CallState.FAILED not in effect.states


async def test_requests_declare_the_version_and_only_the_capabilities_the_host_implements() -> None:
    async def render(question: Any) -> Any:
        raise AssertionError("not asked here")

    async with fake_server() as url:
        for handler, declared in ((None, False), (render, True)):
            async with host_for(url, elicitation=handler) as host:
                await host.discover(ALICE)
                calls = [await host.call(ALICE, "fake.echo", {"n": n}) for n in range(3)]
                conn_records = []
                async with host.connect("fake", ALICE) as conn:
                    await conn.client.session.list_tools()
                    conn_records = conn.journal.recent
                assert all(c.state is CallState.COMPLETED for c in calls)
                assert all(len(c.request_ids) == 1 for c in calls)
                assert len({c.trace_id for c in calls}) == 3
                # Trace context reaches the server in _meta: one span per request under the call's trace.
                received = [m["traceparent"].split("-") for m in RECEIVED[-3:]]
                assert [(r[1], r[2]) for r in received] == [(c.trace_id, c.spans[0]) for c in calls]
                # Each tool call, as the server got it, names its version and exactly these capabilities.
                for meta in RECEIVED[-3:]:
                    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
                    capabilities = meta["io.modelcontextprotocol/clientCapabilities"]
                    assert set(capabilities) == ({"elicitation"} if declared else set()), capabilities
                for record in conn_records:
                    assert record.declared_version == "2026-07-28"
                    assert ("elicitation" in (record.declared_capabilities or {})) is declared
                    assert "sampling" not in (record.declared_capabilities or {})
                    assert "roots" not in (record.declared_capabilities or {})


async def test_a_url_question_shows_domain_and_purpose_and_only_for_allowed_https_domains() -> None:
    asked: list[Any] = []

    async def render(question: Any) -> Any:
        from mcp_types import ElicitResult

        asked.append(question)
        return ElicitResult(action="accept")

    async with fake_server() as url, host_for(url, elicitation=render) as host:
        host.policy.servers["fake"].url_domains = {"idp.example.com"}
        await host.discover(ALICE)
        allowed = await host.call(ALICE, "fake.login", {"url": "https://idp.example.com/signin?x=1"})
        assert allowed.state is CallState.COMPLETED and allowed.result == ["accept"]
        [question] = asked
        assert (question.mode, question.domain, question.message) == ("url", "idp.example.com", "Sign in")
        assert question.server == "fake" and question.call_id == allowed.call_id
        for target in ("https://evil.example.net/signin", "http://idp.example.com/signin"):
            refused = await host.call(ALICE, "fake.login", {"url": target})
            assert refused.result == ["decline"] and refused.elicitation == "decline"
        assert len(asked) == 1, "a URL outside the rule is declined without asking the user"


async def test_a_tool_that_appears_later_is_offered_only_if_it_reads() -> None:
    async with fake_server() as url, host_for(url) as host:
        await host.discover(ALICE)
        assert "fake.touch" in {e.qualified for e in host.active(ALICE)}, "first contact: the allowlist"
        TOOLS.append({"name": "wipe", "inputSchema": {"type": "object"}})
        TOOLS.append(
            {"name": "peek", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
        )
        try:
            diff = await host.discover_server("fake", ALICE)
        finally:
            del TOOLS[-2:]
        assert diff is not None and {k.name for k in diff.added} == {"wipe", "peek"}
        active = {e.qualified for e in host.active(ALICE)}
        assert "fake.peek" in active and "fake.wipe" not in active, "a new effect goes through approval"
        wipe = host.registry.entries[next(k for k in diff.added if k.name == "wipe")]
        host.registry.approve("fake.wipe", wipe.fingerprint)
        assert "fake.wipe" in {e.qualified for e in host.active(ALICE)}


async def test_probes_of_a_server_that_stays_down_are_bounded() -> None:
    from adapter.host import ProbeSchedule

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    host = host_for(
        f"http://127.0.0.1:{port}/mcp", probes=ProbeSchedule(attempts=3, first_wait=0.01, max_wait=0.02)
    )
    async with host:
        report = await host.discover(ALICE)
        assert report.diffs == {} and report.failures["fake"].kind == "unreachable"
        assert host.registry.down == {"fake"}
        probe = host.probe_task("fake")
        assert probe is not None
        with anyio.fail_after(10):
            await probe
        assert host.registry.down == {"fake"}, "after the last probe it stays down until discover()"


class TouchStatus:
    """A host's own resolver for a server that is not ours: its ``touch_status`` tool, by key."""

    tool = "touch_status"

    def arguments(self, idempotency_key: str | None, operation_id: str | None) -> dict[str, Any] | None:
        return {"key": idempotency_key} if idempotency_key else None

    def verdict(self, structured: dict[str, Any]) -> StatusVerdict:
        applied = int(structured["applied"])
        return StatusVerdict(applied > 0, f"applied {applied}x")


@pytest.mark.parametrize(
    ("mode", "settled"), [("id", CallState.COMPLETED), ("id-unapplied", CallState.FAILED)]
)
async def test_a_status_resolver_of_the_hosts_own_settles_an_unknown_outcome_on_another_server(
    mode: str, settled: CallState
) -> None:
    async with fake_server() as url, host_for(url) as host:
        host.policy.servers["fake"].status = TouchStatus()
        await host.discover(ALICE)
        call = await host.call(ALICE, "fake.touch", {"mode": mode})
        assert call.state is CallState.OUTCOME_UNKNOWN and call.idempotency_key
        action = call.status_action
        assert action is not None and (action.server, action.tool) == ("fake", "touch_status")
        assert action.arguments == {"key": call.idempotency_key}
        resolved = await host.resolve(ALICE, call)
        assert resolved.state is settled and resolved.status_action is None
        assert CallState.FAILED not in resolved.states[:-1], "only the server's status tool decided"
        assert APPLIED.count(call.idempotency_key) == (1 if settled is CallState.COMPLETED else 0)
        assert len(call.request_ids) == 1, "the touch was sent once (its id kept), never repeated"
    assert [e.outcome for e in host.audit.events if e.tool == "fake.touch"] == ["outcome_unknown", settled]


async def test_decline_and_cancel_go_back_once_and_are_never_retried() -> None:
    asked: list[Any] = []

    async def render(question: Any) -> Any:
        from mcp_types import ElicitResult

        asked.append(question)
        return ElicitResult(action=question.url.rsplit("/", 1)[1])  # ".../decline" or ".../cancel"

    async with fake_server() as url, host_for(url, elicitation=render) as host:
        host.policy.servers["fake"].url_domains = {"idp.example.com"}
        await host.discover(ALICE)
        for action in ("decline", "cancel"):
            call = await host.call(ALICE, "fake.login", {"url": f"https://idp.example.com/{action}"})
            assert call.elicitation == action and call.result == [action], "the server got the answer"
            assert call.state is CallState.COMPLETED, "declining is a normal outcome, not a failure"
            assert call.states.count(CallState.INPUT_REQUIRED) == 1 and len(call.request_ids) == 2
        assert [q.url.rsplit("/", 1)[1] for q in asked] == ["decline", "cancel"], "each asked once"
