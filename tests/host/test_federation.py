"""The seed's acceptance matrix against two real instances of this kit's server over HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest
from mcp_types import ElicitResult

from adapter.host import (
    AuditLog,
    CallState,
    ConsentRequest,
    Host,
    HostError,
    OperationStatus,
    Policy,
    PolicyDenied,
    Principal,
    ProbeSchedule,
    Question,
    ServerRule,
    ServerSpec,
    UnknownCapability,
    adapter_unknown,
    watch,
)
from tests.host.conftest import HTTP_DECISION

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", "acme")
BOB = Principal("bob", "acme")


class Consents:
    """Records every consent prompt; refuses tools named in ``refuse``."""

    def __init__(self) -> None:
        self.seen: list[ConsentRequest] = []
        self.refuse: set[str] = set()

    async def __call__(self, request: ConsentRequest) -> bool:
        self.seen.append(request)
        return request.tool not in self.refuse


def rule() -> ServerRule:
    return ServerRule(
        principals={"alice", "bob"},
        consent_parameters={"commit_import": ("handle",)},
        status=OperationStatus(),
        unknown_when=adapter_unknown,
    )


def build_host(servers: dict[str, Any], faults: dict[str, Any], **kwargs: Any) -> tuple[Host, Consents]:
    consents = Consents()
    specs = [
        ServerSpec(
            name, server.url, server.credentials, wrap_transport=faults[name].wrap, transport=HTTP_DECISION
        )
        for name, server in servers.items()
    ]
    policy = Policy({name: rule() for name in servers})
    host = Host(
        specs, policy, consent=consents, audit=AuditLog(), probes=ProbeSchedule(60, 0.05, 0.3), **kwargs
    )
    return host, consents


async def stage(host: Host, who: Principal, server: str, target: str = "customers") -> str:
    begun = await host.call(who, f"{server}.begin_import", {"target": target})
    assert begun.state is CallState.COMPLETED, begun.error
    handle = str(begun.result["handle"])
    added = await host.call(who, f"{server}.add_record", {"handle": handle, "record": {"id": 1}})
    assert added.state is CallState.COMPLETED, added.error
    return handle


async def test_same_tool_on_two_servers_stays_apart_in_registry_consent_and_audit(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, consents = build_host(our_servers, faults)
    async with host:
        diffs = await host.discover(ALICE)
        assert {k.qualified for k in diffs["eu"].added} >= {"eu.commit_import"}
        names = [e.qualified for e in host.registry.active()]
        assert "eu.commit_import" in names and "us.commit_import" in names
        handle = await stage(host, ALICE, "eu")
        committed = await host.call(ALICE, "eu.commit_import", {"handle": handle})
        assert committed.state is CallState.COMPLETED and committed.result["status"] == "committed"
        # The handle belongs to eu: the same tool name on us knows nothing of it.
        elsewhere = await host.call(ALICE, "us.get_import_status", {"handle": handle})
        assert elsewhere.state is CallState.FAILED and "handle_not_found" in (elsewhere.error or "")
        # bob on eu: the server keeps principals apart too.
        theirs = await host.call(BOB, "eu.get_import_status", {"handle": handle})
        assert theirs.state is CallState.FAILED
    commit_consent = [c for c in consents.seen if c.tool == "commit_import"]
    assert [(c.server, c.principal, c.qualified, c.parameters) for c in commit_consent] == [
        ("eu", "alice", "eu.commit_import", {"handle": handle})
    ]
    assert not [c for c in consents.seen if c.tool == "get_import_status"], "reads need no consent"
    audited = [(e.server, e.principal, e.tool, e.outcome) for e in host.audit.events]
    assert ("eu", "alice", "eu.commit_import", "completed") in audited
    assert ("us", "alice", "us.get_import_status", "failed") in audited
    assert ("eu", "bob", "eu.get_import_status", "failed") in audited
    dumped = json.dumps([e.as_dict() for e in host.audit.events])
    for server in our_servers.values():
        assert not any(token in dumped for token in server.tokens.values()), "no tokens in the audit"
    assert "customers" not in dumped and '"id"' not in dumped, "no arguments or results in the audit"
    fingerprints = {e.tool: e.fingerprint for e in host.audit.events}
    assert fingerprints["eu.commit_import"] == host.registry.resolve("eu.commit_import").fingerprint


async def test_lost_response_during_a_subscription_is_unknown_and_resolved_by_the_status_tool(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, _ = build_host(our_servers, faults)
    async with host:
        await host.discover(ALICE)
        listening = watch(host, "eu", ALICE)
        with anyio.fail_after(10):
            await listening.listening.wait()
        handle = await stage(host, ALICE, "eu")
        faults["eu"].lose_tool = "commit_import"
        call = await host.call(ALICE, "eu.commit_import", {"handle": handle})
        assert faults["eu"].lost == 1
        assert call.state is CallState.OUTCOME_UNKNOWN
        assert CallState.FAILED not in call.states, "a lost response is never a failure"
        assert call.idempotency_key and call.idempotency_key.startswith("host-")
        action = call.status_action
        assert action is not None and action.tool == "get_operation_status"
        assert action.arguments == {"idempotency_key": call.idempotency_key}
        resolved = await host.resolve(ALICE, call)
        assert resolved.state is CallState.COMPLETED and resolved.server_status == "succeeded"
        assert resolved.status_action is None
        # The server committed exactly once: the host never resent the commit.
        status = await host.call(ALICE, "eu.get_import_status", {"handle": handle})
        commits = [o for o in status.result["operations"] if o["kind"] == "commit"]
        assert status.result["status"] == "committed" and len(commits) == 1
        assert listening.listening.is_set(), "the subscription kept running"
    outcomes = [(e.tool, e.outcome) for e in host.audit.events if e.tool == "eu.commit_import"]
    assert outcomes == [("eu.commit_import", "outcome_unknown"), ("eu.commit_import", "completed")]


async def test_server_reported_unknown_outcome_stays_unknown_until_the_server_knows(
    our_servers: dict[str, Any], faults: dict[str, Any], legacy_address: tuple[str, int]
) -> None:
    from legacy_sim.client import LegacyClient

    host, _ = build_host(our_servers, faults)
    legacy = LegacyClient(*legacy_address, timeout=5.0)
    async with host:
        await host.discover(ALICE)
        handle = await stage(host, ALICE, "us")
        legacy.faults(drop_after_commit=1.0)
        try:
            call = await host.call(ALICE, "us.commit_import", {"handle": handle})
        finally:
            legacy.faults(drop_after_commit=0.0)
        assert call.state is CallState.OUTCOME_UNKNOWN and call.operation_id
        assert call.status_action is not None
        assert call.status_action.arguments == {"operation_id": call.operation_id}
        still = await host.resolve(ALICE, call)
        assert still.state is CallState.OUTCOME_UNKNOWN and still.server_status == "outcome_unknown"
        our_servers["us"].kit.service.reconcile(call.operation_id)
        done = await host.resolve(ALICE, call)
        assert done.state is CallState.COMPLETED
    legacy.close()


async def test_refused_consent_sends_nothing(our_servers: dict[str, Any], faults: dict[str, Any]) -> None:
    host, consents = build_host(our_servers, faults)
    consents.refuse.add("commit_import")
    async with host:
        await host.discover(ALICE)
        handle = await stage(host, ALICE, "eu")
        call = await host.call(ALICE, "eu.commit_import", {"handle": handle})
        assert call.state is CallState.CANCELLED and call.states == [CallState.PLANNED, CallState.CANCELLED]
        status = await host.call(ALICE, "eu.get_import_status", {"handle": handle})
        assert status.result["status"] == "open"


async def test_changed_contract_needs_approval_and_a_down_server_leaves_until_a_probe_sees_it(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, _ = build_host(our_servers, faults)
    eu = our_servers["eu"]
    async with host:
        await host.discover(ALICE)
        approved = host.registry.resolve("eu.begin_import").fingerprint
        await eu.stop()
        await eu.start(ttl_seconds=7200)  # same server, same port: begin_import's description changed
        diff = await host.discover_server("eu", ALICE)
        assert diff is not None
        assert (
            [k.qualified for k in diff.changed] == ["eu.begin_import"] and not diff.added and not diff.removed
        )
        with pytest.raises(UnknownCapability, match="awaits approval"):
            await host.call(ALICE, "eu.begin_import", {"target": "t"})
        assert "eu.begin_import" not in [e.qualified for e in host.registry.active()]
        host.registry.approve("eu.begin_import", approved)  # the old contract: still not approved
        assert "eu.begin_import" not in [e.qualified for e in host.registry.active()]
        host.registry.approve(
            "eu.begin_import", host.registry.entries[_key("eu", "begin_import")].fingerprint
        )
        assert "eu.begin_import" in [e.qualified for e in host.registry.active()]

        await eu.stop()
        down = await host.call(ALICE, "eu.get_import_status", {"handle": "imp_x"})
        assert down.state is CallState.FAILED and "nothing was sent" in (down.error or ""), down.history
        active = [e.qualified for e in host.registry.active()]
        assert not [n for n in active if n.startswith("eu.")] and "us.commit_import" in active
        with pytest.raises(UnknownCapability, match="unreachable"):
            await host.call(ALICE, "eu.begin_import", {"target": "t"})
        await eu.start(ttl_seconds=7200)
        with anyio.fail_after(20):
            while "eu" in host.registry.down:
                await asyncio.sleep(0.05)
        back = await host.call(ALICE, "eu.begin_import", {"target": "t"})
        assert back.state is CallState.COMPLETED


def _key(server: str, name: str) -> Any:
    from adapter.host import CapabilityKey

    return CapabilityKey(server, name)


async def test_two_concurrent_question_rounds_one_declined_never_swap_answers_or_state(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    both_asked = asyncio.Event()
    questions: list[Question] = []

    async def render(question: Question) -> ElicitResult:
        questions.append(question)
        if len(questions) == 2:
            both_asked.set()
        with anyio.fail_after(10):
            await both_asked.wait()  # both rounds are open at once before either is answered
        if "suppliers" in question.message:
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content={"confirm": True})

    host, _ = build_host(our_servers, faults, elicitation=render)
    async with host:
        await host.discover(ALICE)
        customers = await stage(host, ALICE, "eu", "customers")
        suppliers = await stage(host, ALICE, "eu", "suppliers")
        accepted, declined = await asyncio.gather(
            host.call(ALICE, "eu.commit_import", {"handle": customers}),
            host.call(ALICE, "eu.commit_import", {"handle": suppliers}),
        )
        assert {q.call_id for q in questions} == {accepted.call_id, declined.call_id}
        assert all(q.server == "eu" and q.principal == "alice" and q.mode == "form" for q in questions)
        assert accepted.elicitation == "accept" and accepted.result["status"] == "committed"
        assert accepted.result["handle"] == customers
        assert declined.elicitation == "decline" and declined.result["status"] == "declined"
        assert declined.result["handle"] == suppliers
        for call in (accepted, declined):
            assert call.states[:4] == [
                CallState.PLANNED,
                CallState.SENT,
                CallState.INPUT_REQUIRED,
                CallState.SENT,
            ]
            assert call.state is CallState.COMPLETED
        assert len(questions) == 2, "a declined question is never asked again"
        open_one = await host.call(ALICE, "eu.get_import_status", {"handle": suppliers})
        assert open_one.result["status"] == "open"


async def test_a_right_withdrawn_while_the_cache_is_fresh_is_enforced_and_private_lists_stay_private(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, _ = build_host(our_servers, faults)
    async with host:
        await host.discover(ALICE)
        mine = await stage(host, ALICE, "eu")
        first = await host.list_resources(ALICE, "eu")
        assert first.cache_scope == "private" and (first.ttl_ms or 0) > 0
        assert [r.uri for r in first.resources] == [f"import://{mine}"]
        assert await host.list_resources(ALICE, "eu") is first, "a fresh private entry is reused"
        theirs = await host.list_resources(BOB, "eu")
        assert theirs is not first and theirs.resources == [], "bob never gets alice's private list"
        host.policy.servers["eu"].principals.discard("alice")
        with pytest.raises(PolicyDenied):
            await host.list_resources(ALICE, "eu")
        with pytest.raises(PolicyDenied):
            await host.call(ALICE, "eu.get_import_status", {"handle": mine})
        host.policy.servers["eu"].principals.add("alice")
        assert await host.list_resources(ALICE, "eu") is first


async def test_a_cut_listen_stream_with_a_change_in_the_gap_leads_to_a_reread(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, _ = build_host(our_servers, faults)
    async with host:
        await host.discover(ALICE)
        first = await stage(host, ALICE, "eu")
        listening = watch(host, "eu", ALICE)
        with anyio.fail_after(10):
            await listening.listening.wait()
        before = await host.list_resources(ALICE, "eu")
        assert [r.uri for r in before.resources] == [f"import://{first}"]
        faults["eu"].cut_listen.set()
        with anyio.fail_after(10):
            while listening.gaps == 0:
                await asyncio.sleep(0.01)
        # The change happens while nothing listens: no event will ever tell the host about it.
        async with host.connect("eu", ALICE) as conn:
            begun = await conn.client.session.call_tool("begin_import", {"target": "gap"})
        second = begun.structured_content["handle"]  # type: ignore[index]
        with anyio.fail_after(10):
            await listening.listening.wait()
        after = await host.list_resources(ALICE, "eu")
        assert {r.uri for r in after.resources} == {f"import://{first}", f"import://{second}"}


async def test_parallel_calls_of_two_principals_on_two_servers_land_in_their_own_workspace(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, _ = build_host(our_servers, faults)
    host.policy.servers["us"].principals.discard("bob")
    async with host:
        await host.discover(ALICE)
        assert {e.qualified for e in host.active(BOB)} == {e.qualified for e in host.active(ALICE)} - {
            e.qualified for e in host.active(ALICE) if e.key.server == "us"
        }
        handles = {
            (who.id, server): await stage(host, who, server)
            for who in (ALICE, BOB)
            for server in ("eu", "us")
            if (who, server) != (BOB, "us")
        }
        plan = [(who, "eu", owner) for who in (ALICE, BOB) for owner in handles]
        calls = await asyncio.gather(
            *(
                host.call(who, f"{server}.get_import_status", {"handle": handles[owner]})
                for who, server, owner in plan
            )
        )
        for (who, server, owner), call in zip(plan, calls, strict=True):
            assert (call.principal, call.server) == (who.id, server)
            if owner == (who.id, server):
                assert call.state is CallState.COMPLETED and call.result["handle"] == handles[owner]
            else:
                assert call.state is CallState.FAILED and "handle_not_found" in (call.error or "")
        with pytest.raises(PolicyDenied):
            await host.call(BOB, "us.get_import_status", {"handle": handles[("alice", "us")]})
    assert ("us", "bob", "us.get_import_status", "denied") in [
        (e.server, e.principal, e.tool, e.outcome) for e in host.audit.events
    ], "a policy denial is audited too"


async def test_a_listen_event_invalidates_the_entry_it_names(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, _ = build_host(our_servers, faults)
    async with host:
        await host.discover(ALICE)
        handle = await stage(host, ALICE, "eu")
        uri = f"import://{handle}"
        listening = watch(host, "eu", ALICE, (uri,))
        with anyio.fail_after(10):
            await listening.listening.wait()
        key = host.cache.key("eu", "resources/read", uri, "alice", "acme", "private")
        host.cache.put(key, "an answer read earlier", 600_000)
        assert host.cache.get("eu", "resources/read", uri, "alice", "acme") == "an answer read earlier"
        added = await host.call(ALICE, "eu.add_record", {"handle": handle, "record": {"id": 2}})
        assert added.state is CallState.COMPLETED
        with anyio.fail_after(15):
            while host.cache.get("eu", "resources/read", uri, "alice", "acme") is not None:
                await asyncio.sleep(0.02)
        assert listening.events >= 1 and listening.gaps == 0
        fresh = await host.read_resource(ALICE, "eu", uri)
        assert json.loads(fresh.contents[0].text)["record_count"] == 2  # type: ignore[union-attr]


async def test_a_lost_response_of_an_effect_without_a_key_gets_no_dead_status_action(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, _ = build_host(our_servers, faults)
    async with host:
        await host.discover(ALICE)
        handle = await stage(host, ALICE, "eu")
        faults["eu"].lose_tool = "abort_import"  # abort_import takes no idempotency_key
        call = await host.call(ALICE, "eu.abort_import", {"handle": handle})
        assert faults["eu"].lost == 1
        assert call.state is CallState.OUTCOME_UNKNOWN and CallState.FAILED not in call.states
        assert call.idempotency_key is None and call.operation_id is None
        assert call.status_action is None, "get_operation_status cannot find it: no action is offered"
        with pytest.raises(HostError):
            await host.resolve(ALICE, call)
        # The application decides, e.g. by reading: the abort did happen, once.
        status = await host.call(ALICE, "eu.get_import_status", {"handle": handle})
        assert status.result["status"] == "aborted"


async def test_a_servers_tool_allowlist_decides_what_is_offered_and_called(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, consents = build_host(our_servers, faults)
    allowlist = {"begin_import", "add_record", "get_import_status"}
    host.policy.servers["us"].tools = set(allowlist)
    async with host:
        await host.discover(ALICE)
        offered = {e.qualified for e in host.active(ALICE)}
        assert {q for q in offered if q.startswith("us.")} == {f"us.{t}" for t in allowlist}
        assert "eu.commit_import" in offered, "the allowlist is per server"
        handle = await stage(host, ALICE, "us")
        with pytest.raises(UnknownCapability, match="not approved"):
            await host.call(ALICE, "us.commit_import", {"handle": handle})
        # Approved in the registry by someone, the allowlist still decides at call time.
        host.registry.approve(
            "us.commit_import", host.registry.entries[_key("us", "commit_import")].fingerprint
        )
        assert "us.commit_import" not in {e.qualified for e in host.active(ALICE)}
        with pytest.raises(PolicyDenied, match="allowlist"):
            await host.call(ALICE, "us.commit_import", {"handle": handle})
        # Narrowed while running: a tool offered a moment ago is refused now.
        host.policy.servers["us"].tools.discard("add_record")
        with pytest.raises(PolicyDenied):
            await host.call(ALICE, "us.add_record", {"handle": handle, "record": {"id": 2}})
        status = await host.call(ALICE, "us.get_import_status", {"handle": handle})
        assert status.result["status"] == "open" and status.result["record_count"] == 1, "nothing was sent"
    asked = [c.tool for c in consents.seen if c.server == "us"]
    assert asked == ["begin_import", "add_record"], "a refused call never reaches consent"
    denied = [(e.server, e.principal, e.tool) for e in host.audit.events if e.outcome == "denied"]
    assert denied == [("us", "alice", "us.commit_import"), ("us", "alice", "us.add_record")]


async def test_a_call_without_credentials_is_refused_before_consent_and_audited(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, consents = build_host(our_servers, faults)
    carol = Principal("carol", "acme")  # allowed by the policy, but the host holds no token for her on eu
    host.policy.servers["eu"].principals.add("carol")
    async with host:
        await host.discover(ALICE)
        for tool in ("get_import_status", "commit_import"):
            with pytest.raises(PolicyDenied, match="no credentials"):
                await host.call(carol, f"eu.{tool}", {"handle": "imp_x"})
    assert not [c for c in consents.seen if c.principal == "carol"], (
        "never asked to consent to the unsendable"
    )
    events = [(e.server, e.tool, e.outcome) for e in host.audit.events if e.principal == "carol"]
    assert events == [("eu", "eu.get_import_status", "denied"), ("eu", "eu.commit_import", "denied")]
    dumped = json.dumps([e.as_dict() for e in host.audit.events])
    assert not any(token in dumped for token in our_servers["eu"].tokens.values())
