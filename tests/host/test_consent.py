"""Consent a person can decide on, narrow pre-approvals, and a handle on a running call."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from typing import Any

import anyio
import pytest

from adapter.host import (
    AuditLog,
    CallState,
    ConsentRequest,
    FollowUp,
    Host,
    OperationStatus,
    Policy,
    PreApproval,
    Principal,
    Risk,
    ServerRule,
    ServerSpec,
    adapter_running,
    adapter_unknown,
)
from tests.host.conftest import HTTP_DECISION
from tests.host.fake import Fake, fake_server

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", "acme")


class Asked:
    def __init__(self, answer: bool = True) -> None:
        self.seen: list[ConsentRequest] = []
        self.answer = answer
        self.gate: asyncio.Event | None = None

    async def __call__(self, request: ConsentRequest) -> bool:
        self.seen.append(request)
        if self.gate is not None:
            await self.gate.wait()
        return self.answer


def host_of(servers: dict[str, Any], faults: dict[str, Any], asked: Asked) -> Host:
    specs = [
        ServerSpec(n, s.url, s.credentials, wrap_transport=faults[n].wrap, transport=HTTP_DECISION)
        for n, s in servers.items()
    ]
    rule = {"status": OperationStatus(), "unknown_when": adapter_unknown, "running_when": adapter_running}
    policy = Policy({n: ServerRule(principals={"alice"}, **rule) for n in servers})  # type: ignore[arg-type]
    return Host(specs, policy, consent=asked, audit=AuditLog())


async def test_a_consent_request_shows_effect_and_parameters_not_the_record_list_and_names_the_call(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    asked = Asked()
    host = host_of(our_servers, faults, asked)
    async with host:
        await host.discover(ALICE)
        begun = await host.call(ALICE, "eu.begin_import", {"target": "customers"})
        records = [{"id": n, "name": f"c{n}"} for n in range(3)]
        added = await host.call(
            ALICE, "eu.add_records", {"handle": begun.result["handle"], "records": records}
        )
        committed = await host.call(ALICE, "eu.commit_import", {"handle": begun.result["handle"]})
    request = asked.seen[1]
    assert "records=<3 items>" in request.summary() and "c1" not in request.summary()
    assert (request.fingerprint, request.call_id, request.trace_id) == (
        added.fingerprint,
        added.call_id,
        added.trace_id,
    )
    assert request.tenant == "acme" and request.server == "eu" and request.effect
    commit = asked.seen[2]
    assert commit.risk is Risk.DESTRUCTIVE and "cannot simply be undone" in commit.effect
    assert committed.consent == "asked" and committed.state is CallState.COMPLETED


async def test_a_pre_approval_covers_narrow_repeats_only_and_a_contract_change_revokes_it(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    asked = Asked()
    host = host_of(our_servers, faults, asked)
    eu = our_servers["eu"]
    async with host:
        await host.discover(ALICE)
        begin = host.registry.resolve("eu.begin_import")
        commit = host.registry.resolve("eu.commit_import")
        host.pre_approvals.grant(
            PreApproval(
                ALICE, "eu", "begin_import", begin.fingerprint, {"target": lambda t: t == "customers"}
            )
        )
        host.pre_approvals.grant(
            PreApproval(ALICE, "eu", "commit_import", commit.fingerprint, {"handle": bool})
        )
        first = await host.call(ALICE, "eu.begin_import", {"target": "customers"})
        again = await host.call(ALICE, "eu.begin_import", {"target": "customers"})
        assert (first.consent, again.consent) == ("pre-approved", "pre-approved") and not asked.seen
        other_target = await host.call(ALICE, "eu.begin_import", {"target": "suppliers"})
        other_server = await host.call(ALICE, "us.begin_import", {"target": "customers"})
        destructive = await host.call(ALICE, "eu.commit_import", {"handle": first.result["handle"]})
        assert [r.qualified for r in asked.seen] == ["eu.begin_import", "us.begin_import", "eu.commit_import"]
        assert {other_target.consent, other_server.consent, destructive.consent} == {"asked"}

        await eu.stop()
        await eu.start(ttl_seconds=7200)  # begin_import's contract changes
        await host.discover_server("eu", ALICE)
        host.registry.approve("eu.begin_import", host.registry.entries[begin.key].fingerprint)
        after = await host.call(ALICE, "eu.begin_import", {"target": "customers"})
        assert after.consent == "asked", "the changed contract revoked the pre-approval"
        [(rule, why)] = host.pre_approvals.revoked
        assert rule.tool == "begin_import" and "contract changed" in why


async def test_independent_effects_are_asked_about_one_by_one(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    asked = Asked()
    host = host_of(our_servers, faults, asked)
    async with host:
        await host.discover(ALICE)
        calls = await asyncio.gather(
            host.call(ALICE, "eu.begin_import", {"target": "a"}),
            host.call(ALICE, "us.begin_import", {"target": "b"}),
        )
    assert len(asked.seen) == 2 and {r.call_id for r in asked.seen} == {c.call_id for c in calls}
    assert {(r.server, r.parameters["target"]) for r in asked.seen} == {("eu", "a"), ("us", "b")}


# --- a handle on a running call --------------------------------------------------------------------


async def test_cancel_while_consent_is_open_sends_nothing_and_is_audited(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    asked = Asked()
    asked.gate = asyncio.Event()
    host = host_of(our_servers, faults, asked)
    async with host:
        await host.discover(ALICE)
        handle = host.start(ALICE, "eu.begin_import", {"target": "t"})
        with anyio.fail_after(10):
            while not asked.seen:
                await asyncio.sleep(0.01)
        assert handle.state is CallState.PLANNED and not handle.done
        handle.cancel()
        call = await handle.wait()
    assert call.state is CallState.CANCELLED and call.states == [CallState.PLANNED, CallState.CANCELLED]
    assert not [m for m, _ in faults["eu"].sent if m == "tools/call"], "nothing was sent"
    assert [(e.tool, e.outcome) for e in host.audit.events] == [("eu.begin_import", "cancelled")]


async def test_cancelling_a_sent_effect_reaches_the_server_and_leaves_it_unknown_with_a_status_action(
    our_servers: dict[str, Any], faults: dict[str, Any], legacy_address: tuple[str, int], caplog: Any
) -> None:
    from legacy_sim.client import LegacyClient

    asked = Asked()
    host = host_of(our_servers, faults, asked)
    legacy = LegacyClient(*legacy_address, timeout=5.0)
    caplog.set_level(logging.INFO, logger="adapter.requests")
    async with host:
        await host.discover(ALICE)
        begun = await host.call(ALICE, "eu.begin_import", {"target": "slow"})
        await host.call(ALICE, "eu.add_record", {"handle": begun.result["handle"], "record": {"id": 1}})
        legacy.faults(latency_ms=3000)
        try:
            handle = host.start(ALICE, "eu.commit_import", {"handle": begun.result["handle"]})
            with anyio.fail_after(10):  # cancel once the server runs the commit (legacy is 3 s away)
                while handle.state is CallState.PLANNED or not _commit_claimed(our_servers["eu"], handle):
                    await asyncio.sleep(0.01)
            handle.cancel()
            call = await handle.wait()
        finally:
            legacy.faults(latency_ms=0)
        assert call.state is CallState.OUTCOME_UNKNOWN and CallState.FAILED not in call.states
        assert "cancelled by the user after it was sent" in call.history[-1][2]
        assert call.status_action is not None and call.status_action.arguments == {
            "idempotency_key": call.idempotency_key
        }
        with anyio.fail_after(15):  # the server saw the request end as cancelled
            while not _cancelled_on_server(caplog, call.request_ids[0]):
                await asyncio.sleep(0.05)
        followed = await handle.follow()
        assert any(why.startswith("status tool:") for _, _, why in followed.history)
    legacy.close()
    assert ("eu.commit_import", "outcome_unknown") in [(e.tool, e.outcome) for e in host.audit.events]


def _commit_claimed(server: Any, handle: Any) -> bool:
    """Whether the server holds the call's commit operation: the request reached it and runs."""
    key = handle.call.idempotency_key
    if key is None:
        return False
    with contextlib.closing(sqlite3.connect(f"file:{server.folder}/adapter.db?mode=ro", uri=True)) as db:
        found = db.execute(
            "SELECT 1 FROM operations WHERE kind = 'commit' AND idempotency_key = ?", (key,)
        ).fetchone()
    return found is not None


def _cancelled_on_server(caplog: Any, request_id: Any) -> bool:
    for record in caplog.records:
        try:
            event = json.loads(record.getMessage())
        except ValueError:
            continue
        if event.get("request_id") == request_id and event.get("outcome") == "cancelled":
            return True
    return False


@pytest.mark.slow
async def test_cancelling_a_read_on_a_handshake_era_server_sends_its_cancel_notification(
    everything: str, faults: dict[str, Any]
) -> None:
    spec = ServerSpec(
        "ev", everything, {ALICE: "x"}, wrap_transport=faults["everything"].wrap, transport=HTTP_DECISION
    )
    host = Host([spec], Policy({"ev": ServerRule(principals={"alice"})}), consent=Asked(), audit=AuditLog())
    async with host:
        await host.discover(ALICE)
        handle = host.start(ALICE, "ev.trigger-long-running-operation", {"duration": 5, "steps": 5})
        with anyio.fail_after(10):
            while handle.state not in (CallState.RUNNING,):
                await asyncio.sleep(0.02)
        handle.cancel()
        call = await handle.wait()
    assert call.state is CallState.CANCELLED and call.history[-1][2] == "cancelled by the user"
    cancels = [params for method, params in faults["everything"].sent if method == "notifications/cancelled"]
    assert [c["requestId"] for c in cancels] == call.request_ids, "the cancel left the host for that request"
    assert [(e.tool, e.outcome) for e in host.audit.events] == [
        ("ev.trigger-long-running-operation", "cancelled")
    ]


async def test_work_still_running_on_the_server_is_recorded_for_following_not_called_done() -> None:
    async with fake_server(Fake()) as fake:
        spec = ServerSpec("fake", fake.url, {ALICE: "a"}, transport=HTTP_DECISION)
        rule = ServerRule(principals={"alice"}, status=OperationStatus(), running_when=adapter_running)
        host = Host([spec], Policy({"fake": rule}), consent=Asked(), audit=AuditLog())
        async with host:
            await host.discover(ALICE)
            handle = host.start(ALICE, "fake.long", {})
            running = await handle.wait()
            assert running.state is CallState.RUNNING and running.follow_up == FollowUp("operation", "op_1")
            assert running.status_action is not None and running.status_action.arguments == {
                "operation_id": "op_1"
            }
            done = await handle.follow()
            assert done.state is CallState.COMPLETED and done.server_status == "succeeded"
            tasked = await host.call(ALICE, "fake.tasked", {})
    assert tasked.state is CallState.OUTCOME_UNKNOWN and tasked.follow_up == FollowUp("task", "task_1", 100)
    assert tasked.result_problem and "'task'" in tasked.result_problem
    assert [e.outcome for e in host.audit.events] == ["running", "completed", "outcome_unknown"]
