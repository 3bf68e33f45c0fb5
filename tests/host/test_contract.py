"""The integration contract's diff, retention of cached data, and the era on a server we did not write."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mcp_types import Tool

from adapter.host import (
    CapabilityKey,
    ConsentRequest,
    Host,
    IntegrationContract,
    Policy,
    Principal,
    ResultCache,
    Retention,
    ServerRule,
    ServerSpec,
    contract_of,
    diff_contracts,
)
from tests.host.conftest import HTTP_DECISION, OurServer

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", "acme")


async def allow(request: ConsentRequest) -> bool:
    return True


def offline() -> Host:
    spec = ServerSpec("eu", "http://127.0.0.1:1/mcp", {ALICE: "t"}, transport=HTTP_DECISION)
    host = Host([spec], Policy({"eu": ServerRule(principals={"alice"})}), consent=allow)
    host.registry.apply(
        "eu", [Tool(name="commit_import", input_schema={"type": "object"})], auto_approve=None
    )
    return host


def test_a_contract_diff_names_the_policy_and_ux_checks_to_redo() -> None:
    host = offline()
    before = contract_of(host, "eu")
    assert IntegrationContract.from_json(before.to_json()) == before, "kept as JSON in a repository"
    host.policy.servers["eu"].tools = {"commit_import"}
    host.policy.servers["eu"].tenants = {"acme"}
    host.servers["eu"].timeout_seconds = 5
    changed = Tool(name="commit_import", description="now also emails", input_schema={"type": "object"})
    host.registry.apply("eu", [changed], auto_approve=None)
    host.registry.approve(
        "eu.commit_import", host.registry.entries[CapabilityKey("eu", "commit_import")].fingerprint
    )
    rechecks = {r.field: r for r in diff_contracts(before, contract_of(host, "eu"))}
    assert set(rechecks) == {"capabilities", "principal_binding", "timeout_seconds", "tools"}
    assert any("allowlist" in c for c in rechecks["capabilities"].checks)
    assert any("consent texts" in c for c in rechecks["tools"].checks)
    assert rechecks["timeout_seconds"].before == 30.0 and rechecks["timeout_seconds"].after == 5
    assert not diff_contracts(before, before)


def test_cached_data_is_deleted_by_its_retention_class_and_bounded_in_size() -> None:
    now = [0.0]
    cache = ResultCache(clock=lambda: now[0], max_bytes=100)
    short = ResultCache.key("eu", "resources/read", "a", "alice", "acme", "private")
    cache.put(short, "x" * 10, 3_600_000, retention_seconds=60, retention=Retention.SHORT)
    cache.put(
        ResultCache.key("eu", "resources/read", "n", "alice", "acme", "private"),
        "n",
        10**6,
        retention_seconds=0,
    )
    assert cache.retention_of(short) == "short" and len(cache) == 1, "Retention.NONE is never stored"
    now[0] = 61
    assert cache.sweep() == 1 and cache.get("eu", "resources/read", "a", "alice", "acme") is None
    for n in range(5):
        cache.put(
            ResultCache.key("eu", "resources/read", str(n), "alice", "acme", "private"), "y" * 30, 10**6
        )
    assert cache.size <= 100 and cache.evicted == 2, "the oldest go first"
    assert cache.get("eu", "resources/read", "4", "alice", "acme") is not None
    cache.put(ResultCache.key("eu", "resources/read", "b", "bob", "acme", "private"), "b", 10**6)
    assert cache.forget("alice", "acme") == 3 and len(cache) == 1


@pytest.mark.slow
async def test_a_server_required_to_speak_2026_is_refused_when_it_speaks_the_handshake_era(
    everything: str,
) -> None:
    spec = ServerSpec("ev", everything, {ALICE: "x"}, require_era="modern", transport=HTTP_DECISION)
    host = Host([spec], Policy({"ev": ServerRule(principals={"alice"})}), consent=allow)
    async with host:
        report = await host.discover(ALICE)
    assert report.failures["ev"].kind == "era" and not host.active(ALICE) and spec.era is None


@pytest.mark.slow
async def test_the_era_is_learnt_again_when_another_server_answers_at_the_same_address(
    tmp_path: Path, legacy_address: tuple[str, int]
) -> None:
    from tests.host.conftest import EVERYTHING, NODE
    from tests.support.servers import free_port, stop_process

    if not EVERYTHING.exists():
        pytest.skip("@modelcontextprotocol/server-everything is not installed: run `make interop`")
    ours = OurServer("eu", tmp_path / "eu", legacy_address, port=free_port())
    everything = _start_everything(ours.port, NODE, EVERYTHING)
    spec = ServerSpec("svc", ours.url, {**ours.credentials}, transport=HTTP_DECISION)
    from adapter.host import ProbeSchedule

    host = Host(
        [spec],
        Policy({"svc": ServerRule(principals={"alice"})}),
        consent=allow,
        probes=ProbeSchedule(60, 0.05, 0.2),
    )
    async with host:
        await host.discover(ALICE)
        assert spec.era == "legacy"
        stop_process(everything, 10)
        await ours.start()  # another product at the same address: the declared name gives it away
        try:
            refused = await host.discover(ALICE)
            assert refused.failures["svc"].kind == "identity" and not host.active(ALICE)
            spec.server_name = "legacy-import-adapter"  # the operator confirms the new server
            report = await host.discover(ALICE)
            assert "svc" in report.diffs and spec.era == "modern", report.failures
            offered = {e.qualified for e in host.active(ALICE)}
            assert "svc.get_import_status" in offered and "svc.commit_import" not in offered
        finally:
            await ours.stop()


def _start_everything(port: int, node: Path, script: Path) -> subprocess.Popen[bytes]:
    import contextlib
    import os
    import socket
    import time

    process = subprocess.Popen(
        [str(node) if node.exists() else "node", str(script), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return process
        time.sleep(0.05)
    raise RuntimeError("server-everything did not start")
