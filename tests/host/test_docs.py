"""docs/host-kit.md: every example runs as printed, and every test its obligations table names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from adapter.host import AuditLog, CallState, Host, Policy, Principal, ServerRule, ServerSpec
from tests.host.conftest import HTTP_DECISION

pytestmark = pytest.mark.anyio

DOC = Path(__file__).resolve().parents[2] / "docs" / "host-kit.md"
HERE = Path(__file__).resolve().parent


def examples() -> dict[str, Any]:
    """Every python block of the doc, executed into one namespace (each must define what it shows)."""
    namespace: dict[str, Any] = {}
    for code in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S):
        exec(compile(code, str(DOC), "exec"), namespace)
    return namespace


def test_the_first_example_wires_two_servers_in_under_40_lines() -> None:
    first = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)[0]
    assert len(first.strip().splitlines()) < 40
    assert callable(examples()["commit_on_both"])


async def test_the_example_commits_on_both_servers(our_servers: dict[str, Any]) -> None:
    tokens = {name: server.credentials for name, server in our_servers.items()}
    urls = {name: server.url for name, server in our_servers.items()}
    calls = await examples()["commit_on_both"](urls, tokens)
    assert [(c.qualified, c.state) for c in calls] == [
        ("eu.commit_import", CallState.COMPLETED),
        ("us.commit_import", CallState.COMPLETED),
    ]


async def test_the_example_resolves_lost_commits_through_the_status_tool(
    our_servers: dict[str, Any], legacy_address: tuple[str, int]
) -> None:
    from legacy_sim.client import LegacyClient

    tokens = {name: server.credentials for name, server in our_servers.items()}
    urls = {name: server.url for name, server in our_servers.items()}
    legacy = LegacyClient(*legacy_address, timeout=5.0)
    legacy.faults(drop_after_commit=1.0)
    try:
        calls = await examples()["commit_on_both"](urls, tokens)
    finally:
        legacy.faults(drop_after_commit=0.0)
        legacy.close()
    for call in calls:
        assert CallState.FAILED not in call.states
        assert call.state in (CallState.OUTCOME_UNKNOWN, CallState.COMPLETED)
        assert any(why.startswith("status tool:") for _, _, why in call.history)


async def test_the_model_example_runs_one_turn(our_servers: dict[str, Any]) -> None:
    alice = Principal("alice", "acme")
    eu = our_servers["eu"]

    async def allow(request: Any) -> bool:
        return True

    spec = ServerSpec("eu", eu.url, eu.credentials, transport=HTTP_DECISION)
    async with Host(
        [spec], Policy({"eu": ServerRule(principals={"alice"})}), consent=allow, audit=AuditLog()
    ) as host:
        await host.discover(alice)
        proposal = {"name": "eu__begin_import", "arguments": {"target": "customers"}}
        text = await examples()["one_model_turn"](host, alice, proposal)
    assert text.startswith("eu.begin_import completed.") and '<untrusted-data server="eu"' in text


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_test_the_obligations_table_names_exists_and_no_obligation_is_left_without_one() -> None:
    text = DOC.read_text()
    rows = [line for line in text.splitlines() if re.match(r"^\| \d+ \|", line)]
    assert len(rows) >= 51, "one row per obligation of seed 002"
    for row in rows:
        proof = row.rstrip(" |").rsplit(" | ", 1)[1]
        named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", proof)
        assert named or "matrix" in proof, f"no test for: {row[:80]}"
        for file, test in named:
            assert test in _tests_in(HERE / file), f"{file}::{test} named in docs/host-kit.md does not exist"
    assert "test_the_federation_matrix" in _tests_in(HERE / "test_matrix.py")


async def test_the_long_commit_example_lands_through_a_host_with_a_5_s_timeout(
    our_servers: dict[str, Any], legacy_engine: Any
) -> None:
    alice, eu = Principal("alice", "acme"), our_servers["eu"]

    async def allow(request: Any) -> bool:
        return True

    namespace = examples()
    spec = ServerSpec("eu", eu.url, eu.credentials, transport=HTTP_DECISION, timeout_seconds=5)
    async with Host([spec], Policy({"eu": namespace["following_rule"]()}), consent=allow) as host:
        await host.discover(alice)
        begun = await host.call(alice, "eu.begin_import", {"target": "customers"})
        handle = begun.result["handle"]
        records = [{"id": i} for i in range(120)]
        await host.call(alice, "eu.add_records", {"handle": handle, "records": records})
        legacy_engine.update_faults(latency_ms=50)  # about 6 s of commit: past the server's 4 s wait
        try:
            call = await namespace["commit_and_follow"](host, alice, handle)
        finally:
            legacy_engine.update_faults(latency_ms=0)
    assert call.state is CallState.COMPLETED and call.server_status == "succeeded", call.history
    assert CallState.RUNNING in call.states and CallState.FAILED not in call.states
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == 120
