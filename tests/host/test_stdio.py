"""stdio servers beside HTTP: child processes the host starts per principal and ends, with the
transport decision recorded per server. Real children: this kit's ``python -m adapter stdio`` and
``server-everything stdio``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from adapter.host import (
    AuditLog,
    CallState,
    ConsentRequest,
    Host,
    OperationStatus,
    Policy,
    Principal,
    ServerRule,
    ServerSpec,
    StdioServer,
    TransportDecision,
    contract_of,
)
from adapter.store.migrate import upgrade
from tests.host.conftest import EVERYTHING, HTTP_DECISION, NODE

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # child processes

ALICE = Principal("alice", "acme")
BOB = Principal("bob", "acme")
LOCAL = TransportDecision(
    operator="the host itself (a child process per user)",
    update_path="the host's own release (pinned package)",
    principal="the signed-in user; one child each",
    network_path="none: stdin and stdout of a local child",
    lifecycle="started on first use, ended when the host closes",
)


async def allow(request: ConsentRequest) -> bool:
    return True


def our_stdio(tmp_path: Path, legacy_address: tuple[str, int]) -> StdioServer:
    database = f"sqlite:///{tmp_path / 'stdio.db'}"
    upgrade(database)
    env = {
        "ADAPTER_DATABASE_URL": database,
        "ADAPTER_LEGACY_URL": f"tcp://{legacy_address[0]}:{legacy_address[1]}",
        "ADAPTER_SECRET": "stdio-tests-" + "k" * 40,
        "ADAPTER_SECRET_FILE": str(tmp_path / "unused.secret"),
        "ADAPTER_CONFIRM_COMMIT": "never",
    }
    return StdioServer(sys.executable, ("-m", "adapter", "stdio"), env, cwd=str(Path.cwd()))


async def test_our_server_over_stdio_beside_http_one_child_per_principal_ended_with_the_host(
    tmp_path: Path, legacy_address: tuple[str, int], our_servers: dict[str, Any]
) -> None:
    eu = our_servers["eu"]
    specs = [
        ServerSpec(
            "local",
            stdio=our_stdio(tmp_path, legacy_address),
            credentials={ALICE: "", BOB: ""},
            transport=LOCAL,
        ),
        ServerSpec("eu", eu.url, eu.credentials, transport=HTTP_DECISION),
    ]
    rules = {n: ServerRule(principals={"alice", "bob"}) for n in ("local", "eu")}
    host = Host(specs, Policy(rules), consent=allow, audit=AuditLog())
    async with host:
        report = await host.discover(ALICE)
        assert set(report.diffs) == {"local", "eu"} and host.servers["local"].era == "modern"
        begun = await host.call(ALICE, "local.begin_import", {"target": "customers"})
        handle = begun.result["handle"]
        await host.call(ALICE, "local.add_record", {"handle": handle, "record": {"id": 1}})
        committed = await host.call(ALICE, "local.commit_import", {"handle": handle})
        assert committed.state is CallState.COMPLETED and committed.result["status"] == "committed"
        assert host.stdio.started == 1, "alice's child served every call"
        theirs = await host.call(BOB, "local.get_import_status", {"handle": handle})
        assert theirs.state is CallState.COMPLETED and host.stdio.started == 2 and host.stdio.alive() == 2
        assert {e.qualified for e in host.active(ALICE)} >= {"local.commit_import", "eu.commit_import"}
        local, remote = contract_of(host, "local"), contract_of(host, "eu")
        assert local.transport["kind"] == "stdio" and local.transport["network_path"].startswith("none")
        assert remote.transport["kind"] == "streamable-http" and local.endpoint.startswith("stdio: ")
    assert host.stdio.alive() == 0, "the children end with the host"


def test_a_server_without_a_recorded_transport_decision_is_refused() -> None:
    with pytest.raises(ValueError, match="TransportDecision"):
        Host([ServerSpec("x", "http://127.0.0.1:1/mcp", {ALICE: "t"})], Policy(), consent=allow)
    with pytest.raises(ValueError, match="exactly one of url= and stdio="):
        ServerSpec("x", credentials={ALICE: "t"}, transport=LOCAL)


async def test_a_third_party_stdio_server_gets_each_principals_credential_in_its_own_child() -> None:
    if not EVERYTHING.exists():
        pytest.skip("@modelcontextprotocol/server-everything is not installed: run `make interop`")
    node = str(NODE) if NODE.exists() else "node"
    child = StdioServer(node, (str(EVERYTHING), "stdio"), token_env="EVERYTHING_TOKEN")
    spec = ServerSpec(
        "ev", stdio=child, credentials={ALICE: "alice-secret", BOB: "bob-secret"}, transport=LOCAL
    )
    host = Host([spec], Policy({"ev": ServerRule(principals={"alice", "bob"})}), consent=allow)
    async with host:
        await host.discover(ALICE)
        assert host.servers["ev"].era == "legacy", (
            "learnt explicitly: the discover child, then a handshake one"
        )
        envs = {}
        for who in (ALICE, BOB):
            call = await host.call(who, "ev.get-env", {})
            assert call.state is CallState.COMPLETED
            envs[who.id] = json.loads(call.result[0])
        echoed = await host.call(ALICE, "ev.echo", {"message": "hi"})
    assert (
        envs["alice"]["EVERYTHING_TOKEN"] == "alice-secret"
        and envs["bob"]["EVERYTHING_TOKEN"] == "bob-secret"
    )
    assert echoed.result == ["Echo: hi"]


async def test_over_stdio_a_host_that_opts_in_gets_a_task_and_follows_it_to_the_commit(
    tmp_path: Path, legacy_address: tuple[str, int], legacy_engine: Any
) -> None:
    spec = ServerSpec(
        "local",
        stdio=our_stdio(tmp_path, legacy_address),
        credentials={ALICE: ""},
        transport=LOCAL,
        tasks=True,
    )
    rule = ServerRule(principals={"alice"}, status=OperationStatus(wait_seconds=1))
    host = Host([spec], Policy({"local": rule}), consent=allow, audit=AuditLog())
    async with host:
        await host.discover(ALICE)
        begun = await host.call(ALICE, "local.begin_import", {"target": "customers"})
        handle = begun.result["handle"]
        rows = [{"id": i} for i in range(5)]
        await host.call(ALICE, "local.add_records", {"handle": handle, "records": rows})
        running = await host.call(ALICE, "local.commit_import", {"handle": handle})
        assert running.state is CallState.RUNNING, running.history
        assert running.follow_up is not None and running.follow_up.kind == "task"
        done = await host.follow(ALICE, running, deadline_seconds=30)
        assert host.stdio.started == 1, "the discover child gave way to one that declares the extension"
    assert done.state is CallState.COMPLETED and done.structured["status"] == "committed", done.history
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == 5
