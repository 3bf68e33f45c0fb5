"""The kit on a server we did not write: ``@modelcontextprotocol/server-everything`` from npm.

It speaks the handshake era (2025-11-25), so the host reaches it through the SDK's legacy mode, an
explicit compatibility path recorded on the server spec, next to our 2026 server under one registry.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest

from adapter.host import (
    AuditLog,
    CallState,
    ConsentRequest,
    Host,
    HostError,
    OperationStatus,
    Policy,
    Principal,
    Risk,
    ServerRule,
    ServerSpec,
    adapter_unknown,
    watch,
)
from tests.host.conftest import HTTP_DECISION

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # server-everything is a node subprocess

ALICE = Principal("alice", "acme")


def three_servers(everything: str, ours: dict[str, Any], faults: dict[str, Any]) -> tuple[Host, list[Any]]:
    asked: list[ConsentRequest] = []

    async def consent(request: ConsentRequest) -> bool:
        asked.append(request)
        return request.tool != "toggle-subscriber-updates"

    specs = [
        ServerSpec(
            "everything",
            everything,
            {ALICE: "unused"},
            wrap_transport=faults["everything"].wrap,
            transport=HTTP_DECISION,
        ),
        ServerSpec(
            "eu",
            ours["eu"].url,
            ours["eu"].credentials,
            wrap_transport=faults["eu"].wrap,
            transport=HTTP_DECISION,
        ),
    ]
    policy = Policy(
        {
            "everything": ServerRule(principals={"alice"}, risk={"get-sum": Risk.WRITE}),
            "eu": ServerRule(principals={"alice"}, status=OperationStatus(), unknown_when=adapter_unknown),
        }
    )
    return Host(specs, policy, consent=consent, audit=AuditLog()), asked


@pytest.fixture
async def discovered(everything: str, our_servers: dict[str, Any], faults: dict[str, Any]) -> Any:
    """The three-server host, open, with alice's discovery done."""
    host, _ = three_servers(everything, our_servers, faults)
    async with host:
        await host.discover(ALICE)
        yield host


async def test_a_third_party_server_is_federated_with_ours_under_qualified_names(
    everything: str, our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, asked = three_servers(everything, our_servers, faults)
    async with host:
        diffs = await host.discover(ALICE)
        assert host.servers["everything"].era == "legacy" and host.servers["eu"].era == "modern"
        assert host.servers["everything"].server_name and host.servers["everything"].server_name != "eu"
        assert {"everything.echo", "eu.commit_import"} <= {e.qualified for e in host.registry.active()}
        assert all(k.server == "everything" for k in diffs["everything"].added)
        host.registry.alias("echo", "everything.echo")
        echoed = await host.call(ALICE, "echo", {"message": "hello"})
        assert echoed.state is CallState.COMPLETED and echoed.qualified == "everything.echo"
        assert echoed.result == ["Echo: hello"]
        assert not asked, "a read-only tool (by the host's policy) needs no consent"
        summed = await host.call(ALICE, "everything.get-sum", {"a": 2, "b": 3})
        assert summed.state is CallState.COMPLETED and summed.effectful, "the host's rule beats the hint"
        assert [(c.server, c.tool, c.risk) for c in asked] == [("everything", "get-sum", Risk.WRITE)]
        refused = await host.call(ALICE, "everything.toggle-subscriber-updates", {})
        assert refused.state is CallState.CANCELLED
        listening = watch(host, "everything", ALICE)
        with anyio.fail_after(10):
            await listening.task
        assert listening.supported is False, "a handshake-era server has no listen; the watch stops"
    audited = {(e.server, e.tool, e.outcome) for e in host.audit.events}
    assert ("everything", "everything.echo", "completed") in audited, "the audit shows the same origin"


async def test_a_lost_response_from_a_server_without_a_status_tool_stays_unknown(
    discovered: Host, faults: dict[str, Any]
) -> None:
    host = discovered
    faults["everything"].lose_tool = "toggle-simulated-logging"
    call = await host.call(ALICE, "everything.toggle-simulated-logging", {})
    assert faults["everything"].lost == 1
    assert call.state is CallState.OUTCOME_UNKNOWN and CallState.FAILED not in call.states
    assert call.status_action is None, "no status tool known: the application decides, nothing resends"
    with pytest.raises(HostError):
        await host.resolve(ALICE, call)


async def test_a_deadline_cancels_a_read_and_leaves_an_effect_unknown(discovered: Host) -> None:
    host = discovered
    slow = await host.call(
        ALICE,
        "everything.trigger-long-running-operation",
        {"duration": 5, "steps": 5},
        deadline_seconds=0.5,
    )
    assert slow.state is CallState.CANCELLED and slow.states[-2] in (CallState.SENT, CallState.RUNNING)
    host.policy.servers["everything"].risk["trigger-long-running-operation"] = Risk.WRITE
    effect = await host.call(
        ALICE,
        "everything.trigger-long-running-operation",
        {"duration": 5, "steps": 5},
        deadline_seconds=0.5,
    )
    assert effect.state is CallState.OUTCOME_UNKNOWN, "a cancelled effect may still have happened"
    fine = await host.call(
        ALICE,
        "everything.trigger-long-running-operation",
        {"duration": 0.2, "steps": 2},
        deadline_seconds=10,
    )
    assert fine.state is CallState.COMPLETED and CallState.RUNNING in fine.states, "progress means running"


class _LoseHandshake(httpx2.AsyncBaseTransport):
    """Loses every ``initialize`` (the handshake era's first request); everything else passes."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if b'"method":"initialize"' in request.content.replace(b" ", b""):
            raise httpx2.ReadError("the handshake's answer was lost")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_call_that_cannot_even_start_is_audited_as_an_error(discovered: Host) -> None:
    host = discovered
    host.servers["everything"].wrap_transport = _LoseHandshake
    with pytest.raises(Exception) as raised:
        await host.call(ALICE, "everything.echo", {"message": "never sent"})
    assert not isinstance(raised.value, HostError), "not the host's refusal: the handshake failed"
    [event] = [e for e in host.audit.events if e.tool == "everything.echo"]
    assert (event.server, event.principal, event.outcome) == ("everything", "alice", "error")
    assert event.detail.startswith("not sent: ") and "never sent" not in json.dumps(event.as_dict())
