"""The defects a hands-on federation run found (issue 24), each over real HTTP.

Every test here failed on the kit before the fix it names: a committed effect reported ``failed``,
the old contract used after a redeploy, one bad server stopping discovery of all, a misrouted answer
taken for another server's, an era guessed from a passing error and pinned for good, and the smaller
ones (tenant, ``public`` cache, alias shadowing, fingerprint, content blocks, discover ``ttlMs``).
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import anyio
import pytest
from mcp_types import Tool

from adapter.host import (
    AuditLog,
    CallState,
    ConsentRequest,
    Host,
    OperationStatus,
    Policy,
    PolicyDenied,
    Principal,
    ProbeSchedule,
    Registry,
    ServerRule,
    ServerSpec,
    StatusVerdict,
    UnknownCapability,
    adapter_unknown,
    fingerprint,
    watch,
)
from tests.host.conftest import HTTP_DECISION
from tests.host.fake import Fake, fake_server

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", "acme")
BOB = Principal("bob", "acme")


async def allow(request: ConsentRequest) -> bool:
    return True


def ours(servers: dict[str, Any], faults: dict[str, Any], **rule: Any) -> Host:
    specs = [
        ServerSpec(n, s.url, s.credentials, wrap_transport=faults[n].wrap, transport=HTTP_DECISION)
        for n, s in servers.items()
    ]
    rules = {
        n: ServerRule(
            principals={"alice", "bob", "carol"},
            status=OperationStatus(),
            unknown_when=adapter_unknown,
            **rule,
        )
        for n in servers
    }
    return Host(specs, Policy(rules), consent=allow, audit=AuditLog(), probes=ProbeSchedule(60, 0.05, 0.3))


async def stage(host: Host, who: Principal, server: str) -> str:
    begun = await host.call(who, f"{server}.begin_import", {"target": "customers"})
    handle = str(begun.result["handle"])
    await host.call(who, f"{server}.add_record", {"handle": handle, "record": {"id": 1}})
    return handle


# --- a received result is never a failure of the effect -----------------------------------------


async def test_a_lost_relisting_after_the_result_leaves_a_committed_import_completed(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host = ours(our_servers, faults)
    async with host:
        await host.discover(ALICE)
        handle = await stage(host, ALICE, "eu")
        faults["eu"].lose_list_after = "commit_import"
        call = await host.call(ALICE, "eu.commit_import", {"handle": handle})
        assert call.state is CallState.COMPLETED, call.history
        assert CallState.FAILED not in call.states and call.result["status"] == "committed"
        assert faults["eu"].lost == 0, "the host never lists tools again after a result"
        status = await host.call(ALICE, "eu.get_import_status", {"handle": handle})
        assert status.result["status"] == "committed"


class BumpStatus:
    tool = "bump_status"

    def arguments(self, idempotency_key: str | None, operation_id: str | None) -> dict[str, Any] | None:
        return {"key": idempotency_key} if idempotency_key else None

    def verdict(self, structured: dict[str, Any]) -> StatusVerdict:
        return StatusVerdict(int(structured["applied"]) > 0, f"applied {structured['applied']}x")


def fake_host(fake: Fake, **kwargs: Any) -> Host:
    spec = ServerSpec("fake", fake.url, {ALICE: "a", BOB: "b"}, transport=HTTP_DECISION)
    rule = ServerRule(principals={"alice", "bob", "carol"}, status=BumpStatus())
    return Host([spec], Policy({"fake": rule}), consent=allow, audit=AuditLog(), **kwargs)


async def test_structured_content_that_is_a_json_array_is_a_result() -> None:
    async with fake_server() as fake, fake_host(fake) as host:
        await host.discover(ALICE)
        for tool in ("fake.rows", "fake.store_rows"):
            call = await host.call(ALICE, tool, {})
            assert call.state is CallState.COMPLETED, call.history
            assert call.result == [1, 2, 3] and call.structured == [1, 2, 3]


async def test_a_result_that_breaks_its_output_schema_is_unknown_for_an_effect_never_failed() -> None:
    async with fake_server(Fake(break_schema=True)) as fake, fake_host(fake) as host:
        await host.discover(ALICE)
        effect = await host.call(ALICE, "fake.bump", {})
        assert effect.state is CallState.OUTCOME_UNKNOWN and CallState.FAILED not in effect.states
        assert effect.result_problem and "output schema" in effect.result_problem
        assert effect.status_action is not None and effect.status_action.tool == "bump_status"
        resolved = await host.resolve(ALICE, effect)
        assert resolved.state is CallState.COMPLETED, "the server's status tool says it was applied once"
        read = await host.call(ALICE, "fake.count", {})
        assert read.state is CallState.FAILED and "output schema" in (read.error or ""), (
            "a read has no effect"
        )


# --- the contract after a redeploy ---------------------------------------------------------------


async def test_a_cut_listen_stream_rereads_the_tool_list_so_a_redeployed_tool_needs_approval(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host = ours(our_servers, faults, recheck_contract=False)  # the watch alone must catch it
    eu = our_servers["eu"]
    async with host:
        await host.discover(ALICE)
        listening = watch(host, "eu", ALICE)
        with anyio.fail_after(10):
            await listening.listening.wait()
        old = host.registry.resolve("eu.begin_import").fingerprint
        await eu.stop()  # the redeploy cuts the stream; the contract changes in the gap
        await eu.start(ttl_seconds=7200)
        with anyio.fail_after(20):
            while listening.rereads == 0:
                await asyncio.sleep(0.02)
        with pytest.raises(UnknownCapability, match="awaits approval"):
            await host.call(ALICE, "eu.begin_import", {"target": "t"})
        new = host.registry.entries[_key("eu", "begin_import")].fingerprint
        assert new != old
        host.registry.approve("eu.begin_import", new)
        call = await host.call(ALICE, "eu.begin_import", {"target": "t"})
    assert call.state is CallState.COMPLETED
    [event] = [e for e in host.audit.events if e.tool == "eu.begin_import" and e.outcome == "completed"]
    assert event.fingerprint == new, "the audit names the contract actually used"


async def test_without_a_watch_an_effect_rereads_its_contract_before_it_is_sent(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host = ours(our_servers, faults)
    eu = our_servers["eu"]
    async with host:
        await host.discover(ALICE)
        await eu.stop()
        await eu.start(ttl_seconds=7200)
        with pytest.raises(UnknownCapability, match="contract changed since it was approved"):
            await host.call(ALICE, "eu.begin_import", {"target": "t"})
        assert "eu.begin_import" not in {e.qualified for e in host.active(ALICE)}
        assert our_servers["eu"].kit is not None
    [denied] = [e for e in host.audit.events if e.outcome == "denied"]
    assert (denied.tool, denied.principal, denied.tenant) == ("eu.begin_import", "alice", "acme")


def _key(server: str, name: str) -> Any:
    from adapter.host import CapabilityKey

    return CapabilityKey(server, name)


# --- one bad server never stops discovery of the others ----------------------------------------


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


async def test_a_401_an_unreachable_server_and_missing_credentials_each_stay_that_servers_failure(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    eu, us = our_servers["eu"], our_servers["us"]
    carol = Principal("carol", "acme")
    eu_tokens = {ALICE: "a-token-eu-does-not-know", BOB: eu.tokens["bob"], carol: eu.tokens["alice"]}
    specs = [
        ServerSpec("eu", eu.url, eu_tokens, transport=HTTP_DECISION),
        ServerSpec("dead", _dead_url(), {ALICE: "x", carol: "x"}, transport=HTTP_DECISION),
        ServerSpec("us", us.url, us.credentials, wrap_transport=faults["us"].wrap, transport=HTTP_DECISION),
    ]
    rules = {n: ServerRule(principals={"alice", "bob", "carol"}) for n in ("eu", "dead", "us")}
    host = Host(specs, Policy(rules), consent=allow, probes=ProbeSchedule(40, 0.05, 0.2))
    async with host:
        report = await host.discover(ALICE)
        assert set(report.diffs) == {"us"}, "the servers after the bad ones were discovered"
        assert {s: f.kind for s, f in report.failures.items()} == {
            "eu": "unauthorized",
            "dead": "unreachable",
        }
        assert all(f.probing for f in report.failures.values())
        offered = {e.key.server for e in host.active(ALICE)}
        assert offered == {"us"}
        bobs = await host.discover(BOB)
        assert "eu" in bobs.diffs, "alice's 401 on eu is alice's, not eu's"
        assert "eu" in {e.key.server for e in host.active(BOB)} and "eu" not in {
            e.key.server for e in host.active(ALICE)
        }
        with pytest.raises(PolicyDenied, match="refused"):
            await host.call(ALICE, "eu.get_import_status", {"handle": "imp_x"})
        carols = await host.discover(carol)
        assert carols.failures["us"].kind == "no_credentials" and not carols.failures["us"].probing
        assert "eu" in carols.diffs

        faults["us"].fail["tools/list"] = 5  # a passing 503 on us: retried, reported, probed back
        again = await host.discover(ALICE)
        assert again.failures["us"].kind == "unavailable" and "us" in host.registry.down
        assert faults["us"].failed == host.discovery_attempts, "retried a bounded number of times"
        with anyio.fail_after(20):
            while "us" in host.registry.down:
                await asyncio.sleep(0.05)
        assert "us" in {e.key.server for e in host.active(ALICE)}, "probed back"


# --- identity: configured id and URL; declared name and contract as checks ---------------------


async def test_an_answer_from_another_path_of_the_same_origin_is_never_taken_for_this_server() -> None:
    async with fake_server() as fake:
        spec = ServerSpec("us", fake.base + "/us", {ALICE: "a"}, transport=HTTP_DECISION)
        host = Host([spec], Policy({"us": ServerRule(principals={"alice"})}), consent=allow)
        async with host:
            report = await host.discover(ALICE)
        assert report.failures["us"].kind == "identity", report.failures
        assert fake.received["server/discover"] == 0 and fake.received["initialize"] == 0, (
            "nothing reached it"
        )


async def test_a_declared_name_other_than_the_configured_one_is_refused() -> None:
    async with fake_server() as fake:
        spec = ServerSpec("us", fake.url, {ALICE: "a"}, server_name="fake-us", transport=HTTP_DECISION)
        host = Host([spec], Policy({"us": ServerRule(principals={"alice"})}), consent=allow)
        async with host:
            report = await host.discover(ALICE)
        assert report.failures["us"].kind == "identity" and not host.active(ALICE)


async def test_a_misrouted_discovery_showing_another_contract_is_diffed_not_taken_as_the_same(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host = ours(our_servers, faults)
    eu, us = our_servers["eu"], our_servers["us"]
    async with host:
        first = await host.discover(ALICE)
        assert first["us"].previous_contract is None and first["us"].contract == host.registry.contracts["us"]
        await eu.stop()
        tokens = json.loads((eu.folder / "tokens.json").read_text())
        tokens.update({t: {"principal": p, "tenant": "acme"} for p, t in us.tokens.items()})
        (eu.folder / "tokens.json").write_text(json.dumps(tokens))  # one IdP's tokens work on both
        await eu.start(ttl_seconds=7200)  # eu now shows another contract than us
        faults["us"].misroute_to = eu.url  # a proxy below the guard sends us's traffic to eu
        misrouted = await host.discover_server("us", ALICE)
        assert misrouted.previous_contract == first["us"].contract != misrouted.contract
        assert [k.qualified for k in misrouted.changed] == ["us.begin_import"]
        assert "us.begin_import" not in {e.qualified for e in host.active(ALICE)}
        assert us.kit is not None


# --- the era: detected explicitly, retried, requirable, re-learnt --------------------------------


async def test_a_passing_503_on_the_first_discover_is_retried_and_never_pins_the_handshake_era(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host = ours(our_servers, faults)
    faults["eu"].fail["server/discover"] = 1
    async with host:
        report = await host.discover(ALICE)
        assert "eu" in report.diffs and host.servers["eu"].era == "modern"
        assert faults["eu"].failed == 1
        listening = watch(host, "eu", ALICE)
        with anyio.fail_after(10):
            await listening.listening.wait()
        assert listening.supported, "a 2026 server is listened to"


async def test_the_discover_ttl_decides_when_the_era_is_learnt_again() -> None:
    async with fake_server(Fake(discover_ttl_ms=0)) as fake, fake_host(fake) as host:
        await host.discover(ALICE)
        before = fake.received["server/discover"]
        await host.call(ALICE, "fake.say", {})
        await host.call(ALICE, "fake.say", {})
        assert fake.received["server/discover"] == before + 2, "ttlMs 0: nothing learnt stays fresh"
        fake.discover_ttl_ms = 600_000
        await host.discover(ALICE)
        settled = fake.received["server/discover"]
        await host.call(ALICE, "fake.say", {})
        await host.call(ALICE, "fake.say", {})
        assert fake.received["server/discover"] == settled, "fresh for ttlMs: not asked again"
        learnt = host.servers["fake"].learnt
        assert learnt is not None and learnt.fresh_until - learnt.learnt_at == pytest.approx(600, abs=1)


# --- the smaller ones --------------------------------------------------------------------------


async def test_credentials_and_audit_are_per_tenant(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host = ours(our_servers, faults)
    alice_globex = Principal("alice", "globex")
    async with host:
        await host.discover(ALICE)
        with pytest.raises(PolicyDenied, match="alice@globex"):
            await host.call(alice_globex, "eu.get_import_status", {"handle": "imp_x"})
        done = await host.call(ALICE, "eu.get_import_status", {"handle": "imp_x"})
        assert done.tenant == "acme"
    tenants = [(e.principal, e.tenant, e.outcome) for e in host.audit.events]
    assert tenants == [("alice", "globex", "denied"), ("alice", "acme", "failed")]


async def test_a_public_cache_entry_is_never_served_to_a_principal_without_credentials() -> None:
    carol = Principal("carol", "acme")
    async with fake_server() as fake, fake_host(fake) as host:
        first = await host.list_resources(ALICE, "fake")
        assert first.cache_scope == "public" and await host.list_resources(BOB, "fake") is first
        with pytest.raises(PolicyDenied, match="no credentials"):
            await host.list_resources(carol, "fake")
        assert fake.received["resources/list"] == 1


def test_an_alias_can_neither_shadow_a_qualified_name_nor_be_repointed() -> None:
    registry = Registry()
    tool = Tool(name="commit_import", input_schema={"type": "object"})
    registry.apply("eu", [tool], auto_approve=None)
    registry.apply("us", [tool], auto_approve=None)
    with pytest.raises(ValueError, match=r"no '\.'"):
        registry.alias("us.commit_import", "eu.commit_import")
    assert registry.resolve("us.commit_import").key.server == "us"
    registry.alias("commit", "eu.commit_import")
    with pytest.raises(ValueError, match=r"already names eu\.commit_import"):
        registry.alias("commit", "us.commit_import")
    assert registry.resolve("commit").key.server == "eu"


@pytest.mark.parametrize(
    "change",
    [
        {"_meta": {"vendor/x": 1}},
        {"icons": [{"src": "https://example.com/i.png"}]},
        {"execution": {"taskSupport": "optional"}},
    ],
    ids=["_meta", "icons", "execution"],
)
def test_the_fingerprint_covers_meta_icons_and_execution(change: dict[str, Any]) -> None:
    base = {"name": "t", "inputSchema": {"type": "object"}}
    assert fingerprint(Tool.model_validate(base)) != fingerprint(Tool.model_validate({**base, **change}))


async def test_image_audio_and_resource_link_blocks_are_kept() -> None:
    async with fake_server() as fake, fake_host(fake) as host:
        await host.discover(ALICE)
        call = await host.call(ALICE, "fake.media", {})
    assert [b["type"] for b in call.content] == ["text", "image", "audio", "resource_link"]
    assert None not in call.result and call.result[0] == "four blocks"
    assert call.content[1]["mimeType"] == "image/png" and call.content[3]["uri"] == "fake://a"
