"""Long commits through the host kit: ``in_progress`` and tasks are running, followed to the outcome.

Our server (a real uvicorn on loopback, the simulator over TCP with a latency per legacy command so
a commit of N records takes N times it) answers a commit that outlasts its wait budget with
``in_progress``, or, to a request that declared the Tasks extension, with a task. The host's
request timeout is shorter than the commit: the call is ``running`` (never failed, never unknown),
and ``follow()`` long-polls ``get_operation_status`` or asks ``tasks/get`` until it lands; the
legacy system then holds exactly one batch. A recording transport below the wire guard shows what
went over the wire (arguments, the declared extension, the ``Mcp-Name`` header, timings).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from adapter.host import (
    AuditLog,
    CallState,
    ConsentRequest,
    FollowUp,
    Host,
    OperationStatus,
    Policy,
    Principal,
    ServerRule,
    ServerSpec,
    adapter_abort,
    adapter_running,
    adapter_unknown,
)
from tests.host.conftest import HTTP_DECISION, NetworkFaults, OurServer
from tests.host.fake import Fake, fake_server

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", "acme")
TASKS = "io.modelcontextprotocol/tasks"
WAIT = 1.5  # the server's wait budget (ADAPTER_COMMIT_WAIT_SECONDS) in these tests
LATENCY_MS = 50  # per legacy command: a commit of N records takes about N * 50 ms
RECORDS = 100  # about 5 s of commit: longer than the host's request timeout below
TIMEOUT = 3.0  # the host's request timeout for this server (ServerSpec.timeout_seconds)


@dataclass
class Sent:
    method: str
    params: dict[str, Any]
    name_header: str | None
    started: float
    took: float = 0.0


@dataclass
class Recorder:
    """Every JSON-RPC request the host sent to one server, with its timing; can lose one answer."""

    sent: list[Sent] = field(default_factory=list)
    faults: NetworkFaults = field(default_factory=NetworkFaults)

    def wrap(self, inner: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        return _Recording(self.faults.wrap(inner), self)

    def calls(self, tool: str) -> list[Sent]:
        return [s for s in self.sent if s.method == "tools/call" and s.params.get("name") == tool]

    def of(self, method: str) -> list[Sent]:
        return [s for s in self.sent if s.method == method]


class _Recording(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, recorder: Recorder) -> None:
        self.inner, self.recorder = inner, recorder

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            body = json.loads(request.content)
        except ValueError:
            body = {}
        if not isinstance(body, dict) or "method" not in body:
            return await self.inner.handle_async_request(request)
        sent = Sent(
            body["method"], body.get("params") or {}, request.headers.get("mcp-name"), anyio.current_time()
        )
        self.recorder.sent.append(sent)
        response = await self.inner.handle_async_request(request)
        await response.aread()
        sent.took = anyio.current_time() - sent.started
        return httpx2.Response(
            response.status_code, headers=response.headers, content=response.content, request=request
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def declared(sent: Sent) -> dict[str, Any]:
    meta = sent.params.get("_meta") or {}
    capabilities = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
    return capabilities.get("extensions") or {}


class Consent:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, request: ConsentRequest) -> bool:
        self.asked.append(request.tool)
        return True


@pytest.fixture
async def eu(tmp_path: Path, legacy_address: tuple[str, int]) -> AsyncIterator[OurServer]:
    """One instance of our server with a short wait budget, so the tests stay short."""
    server = OurServer("eu", tmp_path / "eu", legacy_address)
    await server.start(commit_wait_seconds=WAIT)
    try:
        yield server
    finally:
        await server.stop()


def host_for(
    server: OurServer, recorder: Recorder, *, tasks: bool = False, consent: Consent | None = None
) -> Host:
    spec = ServerSpec(
        "eu",
        server.url,
        server.credentials,
        transport=HTTP_DECISION,
        timeout_seconds=TIMEOUT,
        wrap_transport=recorder.wrap,
        tasks=tasks,
    )
    rule = ServerRule(
        principals={"alice"},
        status=OperationStatus(wait_seconds=WAIT),
        running_when=adapter_running,
        unknown_when=adapter_unknown,
        stop_with=adapter_abort,
    )
    return Host([spec], Policy({"eu": rule}), consent=consent or Consent(), audit=AuditLog())


async def staged(host: Host, records: int = RECORDS) -> str:
    begun = await host.call(ALICE, "eu.begin_import", {"target": "customers"})
    handle = str(begun.result["handle"])
    rows = [{"id": i} for i in range(records)]
    added = await host.call(ALICE, "eu.add_records", {"handle": handle, "records": rows})
    assert added.state is CallState.COMPLETED, added.history
    return handle


async def test_a_commit_longer_than_the_hosts_timeout_is_running_and_followed_to_one_batch(
    eu: OurServer, legacy_engine: Any
) -> None:
    recorder = Recorder()
    host = host_for(eu, recorder)
    async with host:
        await host.discover(ALICE)
        handle = await staged(host)
        legacy_engine.update_faults(latency_ms=LATENCY_MS)
        started = anyio.current_time()
        call = host.start(ALICE, "eu.commit_import", {"handle": handle})
        running = await call.wait()
        answered = anyio.current_time() - started
        assert running.state is CallState.RUNNING, running.history
        assert answered < TIMEOUT, "in_progress came inside the host's request timeout"
        assert running.follow_up == FollowUp("operation", running.structured["operation_id"])
        assert running.status_action is not None and running.status_action.arguments == {
            "operation_id": running.operation_id,
            "wait_seconds": WAIT,
        }
        assert running.stop_action is not None and running.stop_action.arguments == {"handle": handle}
        brief = await call.follow(deadline_seconds=0.3)
        assert brief.state is CallState.RUNNING and "deadline passed" in brief.history[-1][2]
        done = await call.follow(deadline_seconds=60)
        took = anyio.current_time() - started
        legacy_engine.update_faults(latency_ms=0)

    assert done.state is CallState.COMPLETED and done.server_status == "succeeded", done.history
    assert CallState.FAILED not in done.states and CallState.OUTCOME_UNKNOWN not in done.states
    assert done.status_action is None and done.stop_action is None, "a settled call offers nothing more"
    assert took > TIMEOUT, "the commit really outlasted the host's request timeout"
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == RECORDS
    polls = recorder.calls("get_operation_status")
    assert polls and all(p.params["arguments"]["wait_seconds"] == WAIT for p in polls)
    assert max(p.took for p in polls) > WAIT * 0.7, "the server held a question: a long-poll"
    assert len(polls) <= took / WAIT + 3, "no hammering: about one question per wait budget"
    assert not any(declared(s) for s in recorder.sent), "tasks not opted in: never declared"
    assert len(recorder.calls("commit_import")) == 1, "followed, never resent"
    outcomes = [(e.outcome, e.detail) for e in host.audit.events if e.tool == "eu.commit_import"]
    assert [o for o, _ in outcomes] == ["running", "running", "completed"]
    assert outcomes[-1][1].startswith("followed (status tool, ")


async def test_a_lost_in_progress_answer_is_resolved_by_the_status_tool_and_followed(
    eu: OurServer, legacy_engine: Any
) -> None:
    recorder = Recorder()
    host = host_for(eu, recorder)
    async with host:
        await host.discover(ALICE)
        handle = await staged(host)
        legacy_engine.update_faults(latency_ms=LATENCY_MS)
        recorder.faults.lose_tool = "commit_import"  # the server answers in_progress; it never arrives
        lost = await host.call(ALICE, "eu.commit_import", {"handle": handle})
        assert lost.state is CallState.OUTCOME_UNKNOWN and recorder.faults.lost == 1, lost.history
        assert lost.status_action is not None
        assert lost.status_action.arguments == {"idempotency_key": lost.idempotency_key, "wait_seconds": WAIT}
        done = await host.follow(ALICE, lost, deadline_seconds=60)
        legacy_engine.update_faults(latency_ms=0)

    assert done.state is CallState.COMPLETED, done.history
    states = done.states
    assert CallState.FAILED not in states
    assert states.index(CallState.OUTCOME_UNKNOWN) < states.index(CallState.RUNNING), "status: in_progress"
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == RECORDS and len(recorder.calls("commit_import")) == 1


async def test_a_task_is_running_and_followed_with_tasks_get_at_the_servers_interval(
    eu: OurServer, legacy_engine: Any
) -> None:
    recorder = Recorder()
    host = host_for(eu, recorder, tasks=True)
    async with host:
        await host.discover(ALICE)
        handle = await staged(host)
        legacy_engine.update_faults(latency_ms=LATENCY_MS)
        call = host.start(ALICE, "eu.commit_import", {"handle": handle})
        running = await call.wait()
        assert running.state is CallState.RUNNING, running.history
        follow_up = running.follow_up
        assert follow_up is not None and follow_up.kind == "task" and follow_up.poll_interval_ms == 2000
        done = await call.follow(deadline_seconds=60)
        legacy_engine.update_faults(latency_ms=0)

    assert done.state is CallState.COMPLETED, done.history
    assert done.structured["status"] == "committed" and done.structured["operation_id"] == follow_up.id
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == RECORDS
    [commit] = recorder.calls("commit_import")
    assert TASKS in declared(commit), "the commit declared the Tasks extension"
    gets = recorder.of("tasks/get")
    assert gets and all(g.name_header == follow_up.id and g.params["taskId"] == follow_up.id for g in gets)
    assert all(TASKS in declared(g) for g in gets)
    gaps = [b.started - a.started for a, b in itertools.pairwise(gets)]
    assert all(gap >= 1.9 for gap in gaps), f"pollIntervalMs honoured: {gaps}"
    assert not recorder.calls("get_operation_status"), "a task is followed by tasks/get alone"


async def test_tasks_are_declared_only_where_the_spec_opts_in_and_the_server_offers_them(
    eu: OurServer, legacy_engine: Any
) -> None:
    plain, tasked = Recorder(), Recorder()
    for recorder, opted in ((plain, False), (tasked, True)):
        async with host_for(eu, recorder, tasks=opted) as host:
            await host.discover(ALICE)
            call = await host.call(ALICE, "eu.begin_import", {"target": "customers"})
            assert call.state is CallState.COMPLETED
    assert not any(declared(s) for s in plain.sent)
    [discover] = tasked.of("server/discover")
    assert not declared(discover), "not declared before the server's offer is known"
    assert all(TASKS in declared(s) for s in tasked.sent if s.method != "server/discover")


async def test_cancelling_a_task_sends_tasks_cancel_and_nothing_lands(
    eu: OurServer, legacy_engine: Any
) -> None:
    recorder = Recorder()
    host = host_for(eu, recorder, tasks=True)
    async with host:
        await host.discover(ALICE)
        handle = await staged(host, records=400)  # 20 s of commit: it is stopped long before COMMIT
        legacy_engine.update_faults(latency_ms=LATENCY_MS)
        call = host.start(ALICE, "eu.commit_import", {"handle": handle})
        assert (await call.wait()).state is CallState.RUNNING
        call.cancel("the user stopped it")
        done = await call.follow(deadline_seconds=30)
        legacy_engine.update_faults(latency_ms=0)
        status = await host.call(ALICE, "eu.get_import_status", {"handle": handle})

    assert done.state is CallState.CANCELLED, done.history
    assert legacy_engine.committed_batches() == []
    assert status.result["status"] == "open", "stopped before COMMIT: the import is open again"
    [cancel] = recorder.of("tasks/cancel")
    assert done.follow_up is not None and cancel.name_header == done.follow_up.id
    details = [e.detail for e in host.audit.events if e.tool == "eu.commit_import"]
    assert any("the user stopped it: tasks/cancel acknowledged" in d for d in details), details


async def test_cancel_after_in_progress_stops_following_and_the_offered_abort_stops_the_commit(
    eu: OurServer, legacy_engine: Any
) -> None:
    recorder, consent = Recorder(), Consent()
    host = host_for(eu, recorder, consent=consent)
    async with host:
        await host.discover(ALICE)
        handle = await staged(host, records=400)
        legacy_engine.update_faults(latency_ms=LATENCY_MS)
        call = host.start(ALICE, "eu.commit_import", {"handle": handle})
        running = await call.wait()
        assert running.state is CallState.RUNNING and running.stop_action is not None

        async def cancel_soon() -> None:
            await anyio.sleep(0.5)
            call.cancel("the user stopped it")

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_soon)
            stopped = await call.follow(deadline_seconds=30)
        assert stopped.state is CallState.RUNNING, "the host cannot stop the server's work by itself"
        assert any("the host stops following" in why for _, _, why in stopped.history)
        assert not recorder.calls("abort_import"), "the abort is offered, never run by the host"
        action = stopped.stop_action
        assert action is not None and action.tool == "abort_import"
        asked_before = len(consent.asked)
        aborted = await host.call(ALICE, f"eu.{action.tool}", action.arguments)
        assert consent.asked[asked_before:] == ["abort_import"], "the stop is an effect: consent first"
        assert aborted.state is CallState.COMPLETED and aborted.result["status"] == "aborted", aborted.result
        done = await call.follow(deadline_seconds=30)
        legacy_engine.update_faults(latency_ms=0)

    assert done.state is CallState.CANCELLED and done.server_status == "cancelled", done.history
    assert legacy_engine.committed_batches() == []
    details = [e.detail for e in host.audit.events if e.tool == "eu.commit_import"]
    assert any("the host stops following" in d for d in details), details


DONE = {"content": [{"type": "text", "text": "done"}], "structuredContent": {"n": 1}, "isError": False}
REFUSED = {"content": [{"type": "text", "text": "the legacy system refused the batch"}], "isError": True}


@pytest.mark.parametrize(
    ("states", "expected", "error"),
    [
        ([{"status": "working"}, {"status": "completed", "result": DONE}], CallState.COMPLETED, None),
        (
            [{"status": "completed", "result": REFUSED}],
            CallState.FAILED,
            "the legacy system refused the batch",
        ),
        (
            [{"status": "working"}, {"status": "cancelled", "statusMessage": "stopped"}],
            CallState.CANCELLED,
            None,
        ),
        ([{"status": "failed", "error": {"code": -32603, "message": "boom"}}], CallState.FAILED, "boom"),
    ],
    ids=["completed", "completed-with-an-error-result", "cancelled", "failed"],
)
async def test_each_end_of_a_task_settles_the_call_as_the_server_says(
    states: list[dict[str, Any]], expected: CallState, error: str | None
) -> None:
    async with fake_server(Fake(tasks=True, task_states=list(states))) as fake:
        spec = ServerSpec("fake", fake.url, {ALICE: "a"}, transport=HTTP_DECISION, tasks=True)
        rule = ServerRule(principals={"alice"}, status=OperationStatus())
        async with Host([spec], Policy({"fake": rule}), consent=Consent(), audit=AuditLog()) as host:
            await host.discover(ALICE)
            running = await host.call(ALICE, "fake.tasked", {})
            assert running.state is CallState.RUNNING and running.follow_up == FollowUp("task", "task_1", 100)
            done = await host.follow(ALICE, running, deadline_seconds=10)
    assert done.state is expected, done.history
    assert done.error == error
    assert fake.received["tasks/get"] == len(states)
    assert all(r["name"] == "task_1" for r in fake.task_requests), "Mcp-Name is the task id"
    if expected is CallState.COMPLETED:
        assert done.structured == {"n": 1}


async def test_a_task_the_server_no_longer_knows_is_unknown_and_resolved_by_the_status_tool() -> None:
    async with fake_server(Fake(tasks=True, created_task="forgotten")) as fake:
        spec = ServerSpec("fake", fake.url, {ALICE: "a"}, transport=HTTP_DECISION, tasks=True)
        rule = ServerRule(principals={"alice"}, status=OperationStatus())
        async with Host([spec], Policy({"fake": rule}), consent=Consent(), audit=AuditLog()) as host:
            await host.discover(ALICE)
            running = await host.call(ALICE, "fake.tasked", {})
            assert running.state is CallState.RUNNING
            unknown = await host.follow(ALICE, running, deadline_seconds=10)
            assert unknown.state is CallState.OUTCOME_UNKNOWN, unknown.history
            assert unknown.error == "the server no longer knows the task"
            action = unknown.status_action
            assert action is not None and action.arguments == {"idempotency_key": unknown.idempotency_key}
            resolved = await host.follow(ALICE, unknown, deadline_seconds=10)
    assert resolved.state is CallState.COMPLETED and resolved.server_status == "succeeded"
    assert fake.received["tasks/get"] == 1 and fake.received["tools/call"] == 2, "asked, never resent"
