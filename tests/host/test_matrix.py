"""The seed's acceptance matrix as one test over real servers.

Two users use two servers with a same-named tool (two instances of this kit's server, "eu" and "us")
beside a third-party server (``server-everything``); "us" changes its contract and then goes down;
meanwhile a subscription runs on "eu" while an effectful call there loses its response. Registry,
cache, model context, consent and telemetry keep server and principal throughout; the host never
offers an old capability and never shows an unknown outcome as a safe failure. The negative tests the
seed lists are elsewhere in tests/host (see the table in docs/host-kit.md).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from adapter.host import (
    AuditLog,
    CallState,
    ConsentRequest,
    Host,
    ModelToolset,
    OperationStatus,
    Policy,
    Principal,
    ProbeSchedule,
    ServerRule,
    ServerSpec,
    adapter_unknown,
    watch,
)
from tests.host.conftest import HTTP_DECISION

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # server-everything is a node subprocess

ALICE = Principal("alice", "acme")
BOB = Principal("bob", "acme")


async def test_the_federation_matrix(
    our_servers: dict[str, Any], faults: dict[str, Any], everything: str
) -> None:
    asked: list[ConsentRequest] = []

    async def consent(request: ConsentRequest) -> bool:
        asked.append(request)
        return True

    eu, us = our_servers["eu"], our_servers["us"]
    both = {ALICE: "unused", BOB: "unused"}
    specs = [
        ServerSpec("eu", eu.url, eu.credentials, wrap_transport=faults["eu"].wrap, transport=HTTP_DECISION),
        ServerSpec("us", us.url, us.credentials, wrap_transport=faults["us"].wrap, transport=HTTP_DECISION),
        ServerSpec("ev", everything, both, wrap_transport=faults["everything"].wrap, transport=HTTP_DECISION),
    ]
    ours = {"principals": {"alice", "bob"}, "status": OperationStatus(), "unknown_when": adapter_unknown}
    policy = Policy(
        {"eu": ServerRule(**ours), "us": ServerRule(**ours), "ev": ServerRule(principals={"alice", "bob"})}  # type: ignore[arg-type]
    )
    host = Host(specs, policy, consent=consent, audit=AuditLog(), probes=ProbeSchedule(3, 0.05, 0.1))
    async with host:
        for who in (ALICE, BOB):
            assert (await host.discover(who)).ok
        offered = {e.qualified for e in host.active(ALICE)}
        assert {"eu.commit_import", "us.commit_import", "ev.echo"} <= offered
        models = {who.id: ModelToolset(host, who) for who in (ALICE, BOB)}
        assert {"eu__commit_import", "us__commit_import", "ev__echo"} <= set(models["bob"].tools)

        listening = watch(host, "eu", ALICE)
        with anyio.fail_after(10):
            await listening.listening.wait()
        handles = {(who.id, s): await _stage(host, who, s) for who in (ALICE, BOB) for s in ("eu", "us")}

        # Cache: each principal's private list is theirs.
        lists = {who.id: await host.list_resources(who, "eu") for who in (ALICE, BOB)}
        assert [r.uri for r in lists["alice"].resources] == [f"import://{handles['alice', 'eu']}"]
        assert [r.uri for r in lists["bob"].resources] == [f"import://{handles['bob', 'eu']}"]

        # An effect loses its response while the subscription runs: unknown, never failed, resolvable.
        faults["eu"].lose_tool = "commit_import"
        lost = await host.call(ALICE, "eu.commit_import", {"handle": handles["alice", "eu"]})
        assert lost.state is CallState.OUTCOME_UNKNOWN and CallState.FAILED not in lost.states
        assert lost.status_action is not None and listening.listening.is_set()
        shaped = models["alice"].shape(lost)
        assert "outcome unknown" in shaped.text and "failed" not in shaped.text.split("\n", 1)[0]
        assert (await host.resolve(ALICE, lost)).state is CallState.COMPLETED

        # Model context: bob's result carries its server and bob's call.
        seen = await models["bob"].invoke("us__get_import_status", {"handle": handles["bob", "us"]})
        assert seen.call is not None and seen.call.principal == "bob" and 'server="us"' in seen.text
        third = await models["alice"].invoke("ev__echo", {"message": "hi"})
        assert third.item is not None and third.item.origin.server == "ev" and "Echo: hi" in third.text

        # us changes its contract: bob's proposal under the old one is refused before anything is sent.
        await us.stop()
        await us.start(ttl_seconds=7200)
        stale = await models["bob"].invoke("us__begin_import", {"target": "t"})
        assert stale.refused and "contract changed" in stale.refused
        assert "us.begin_import" not in {e.qualified for e in host.active(BOB)}, "no old capability offered"

        # ... and then goes down: its tools leave the offer for everyone.
        await us.stop()
        down = await host.call(BOB, "us.get_import_status", {"handle": handles["bob", "us"]})
        assert down.state is CallState.FAILED and "nothing was sent" in (down.error or "")
        for who in (ALICE, BOB):
            assert not [e for e in host.active(who) if e.key.server == "us"]
            assert not [n for n in ModelToolset(host, who).tools if n.startswith("us__")]
        assert {e.key.server for e in host.active(BOB)} == {"eu", "ev"}

    # Consent and telemetry keep server and principal; a collision looks the same in UI, audit and call.
    commit_consent = [r for r in asked if r.tool == "commit_import"]
    assert [(r.qualified, r.principal, r.call_id) for r in commit_consent] == [
        ("eu.commit_import", "alice", lost.call_id)
    ]
    events = host.audit.events
    assert all(e.server and e.principal and e.tenant == "acme" for e in events)
    assert all(e.tool.startswith(e.server + ".") for e in events)
    lost_events = [e for e in events if e.call_id == lost.call_id]
    assert [e.outcome for e in lost_events] == ["outcome_unknown", "completed"]
    assert {(e.server, e.principal, e.tool) for e in lost_events} == {("eu", "alice", lost.qualified)}
    assert ("us", "bob", "us.begin_import", "denied") in {
        (e.server, e.principal, e.tool, e.outcome) for e in events
    }
    dumped = json.dumps([e.as_dict() for e in events])
    assert not any(t in dumped for s in (eu, us) for t in s.tokens.values())


async def _stage(host: Host, who: Principal, server: str) -> str:
    begun = await host.call(who, f"{server}.begin_import", {"target": "customers"})
    assert begun.state is CallState.COMPLETED, begun.history
    handle = str(begun.result["handle"])
    await host.call(who, f"{server}.add_record", {"handle": handle, "record": {"id": 1}})
    return handle
