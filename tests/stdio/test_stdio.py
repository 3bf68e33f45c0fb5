"""``python -m adapter stdio`` as a host would run it: a subprocess spoken to over stdin/stdout.

Each test starts the real command with ``ADAPTER_*`` settings pointing at a migrated SQLite database
in ``tmp_path`` and the simulator over TCP (the root conftest's ``legacy_address``). The SDK's own
client drives it (``Client(StdioServerParameters(...))``, in both eras); raw tests check the framing:
stdout carries nothing but JSON-RPC lines, and the first message fixes the connection's era (a
modern-only server refuses the handshake and everything after it with -32022).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import CallToolResult, ElicitResult

from adapter.store.migrate import upgrade
from legacy_sim.engine import LegacyEngine
from tests.support.constants import PROTOCOL_VERSION, SECRET, TIMEOUT
from tests.support.mcp import LEGACY_INITIALIZE, modern_meta
from tests.support.servers import read_line, send_line, stdio_client, stdio_process
from tests.support.wait import poll_until

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # a Python subprocess per test


@pytest.fixture
def server_env(tmp_path: Path, legacy_address: tuple[str, int]) -> dict[str, str]:
    """ADAPTER_* settings for one server process: a fresh migrated SQLite db, the TCP simulator."""
    db_url = f"sqlite:///{tmp_path / 'adapter.db'}"
    upgrade(db_url)
    host, port = legacy_address
    return {
        "ADAPTER_DATABASE_URL": db_url,
        "ADAPTER_LEGACY_URL": f"tcp://{host}:{port}",
        "ADAPTER_SECRET": SECRET,
        "ADAPTER_SECRET_FILE": str(tmp_path / "unused.secret"),
        "ADAPTER_COMMIT_CHUNK_SIZE": "10",  # progress every 10 records
        "ADAPTER_CONFIRM_COMMIT": "never",  # these tests are about the transport, not confirmation
    }


async def call(client: Client, name: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments, **kwargs)
    assert isinstance(result, CallToolResult)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def records(n: int) -> list[dict[str, Any]]:
    return [{"n": i, "name": f"customer {i}"} for i in range(n)]


async def test_happy_path_begin_add_commit_status(
    server_env: dict[str, str], tmp_path: Path, legacy_engine: LegacyEngine
) -> None:
    async with stdio_client(server_env, tmp_path) as client:
        assert client.protocol_version == PROTOCOL_VERSION
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"begin_import", "add_records", "commit_import", "get_import_status"} <= names

        begun = await call(client, "begin_import", {"target": "customers"})
        handle = begun["handle"]
        assert begun["status"] == "open"
        added = await call(client, "add_records", {"handle": handle, "records": records(25)})
        assert (added["accepted"], added["record_count"]) == (25, 25)
        committed = await call(client, "commit_import", {"handle": handle})
        assert committed["status"] == "committed"
        assert committed["record_count"] == 25
        status = await call(client, "get_import_status", {"handle": handle})
        assert status["status"] == "committed"
        assert [op["status"] for op in status["operations"] if op["kind"] == "commit"] == ["succeeded"]

    batches = legacy_engine.committed_batches()
    assert len(batches) == 1
    assert str(batches[0]["legacy_batch_id"]) == committed["legacy_batch_id"]


async def test_replays_with_the_same_idempotency_key_act_once(
    server_env: dict[str, str], tmp_path: Path, legacy_engine: LegacyEngine
) -> None:
    async with stdio_client(server_env, tmp_path) as client:
        first = await call(client, "begin_import", {"target": "customers", "idempotency_key": "begin-1"})
        again = await call(client, "begin_import", {"target": "customers", "idempotency_key": "begin-1"})
        assert again["handle"] == first["handle"]
        assert (first["replayed"], again["replayed"]) == (False, True)

        handle = first["handle"]
        add = {"handle": handle, "records": records(3), "idempotency_key": "add-1"}
        assert (await call(client, "add_records", add))["record_count"] == 3
        replay = await call(client, "add_records", add)
        assert (replay["record_count"], replay["replayed"]) == (3, True)

        commit = {"handle": handle, "idempotency_key": "commit-1"}
        done = await call(client, "commit_import", commit)
        replayed = await call(client, "commit_import", commit)
        assert replayed["replayed"] is True
        assert replayed["legacy_batch_id"] == done["legacy_batch_id"]
    assert len(legacy_engine.committed_batches()) == 1


async def test_commit_reports_progress(server_env: dict[str, str], tmp_path: Path) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with stdio_client(server_env, tmp_path) as client:
        handle = (await call(client, "begin_import", {"target": "customers"}))["handle"]
        await call(client, "add_records", {"handle": handle, "records": records(35)})
        committed = await call(client, "commit_import", {"handle": handle}, progress_callback=on_progress)
        assert committed["status"] == "committed"

    assert seen, "no notifications/progress arrived"
    assert [p for p, _ in seen] == sorted(p for p, _ in seen)
    assert seen[-1] == (35, 35)
    assert all(total == 35 for _, total in seen)


async def test_cancelling_a_commit_mid_way_records_cancelled_and_sends_no_batch(
    server_env: dict[str, str], tmp_path: Path, legacy_engine: LegacyEngine
) -> None:
    legacy_engine.update_faults(latency_ms=2)  # ~2 ms per ADD: 400 records take ~0.8 s
    first_progress = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        first_progress.set()

    async with stdio_client(server_env, tmp_path) as client:
        handle = (await call(client, "begin_import", {"target": "customers"}))["handle"]
        await call(client, "add_records", {"handle": handle, "records": records(400)})

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tasks:

                async def commit() -> None:
                    await client.call_tool("commit_import", {"handle": handle}, progress_callback=on_progress)
                    pytest.fail("the commit finished although it was cancelled")

                tasks.start_soon(commit)
                await first_progress.wait()
                tasks.cancel_scope.cancel()  # the client sends notifications/cancelled

        # The server stops at its next check and records the truth; poll until it has.
        def commits(status: dict[str, Any]) -> list[dict[str, Any]]:
            return [op for op in status["operations"] if op["kind"] == "commit"]

        status = await poll_until(
            lambda: call(client, "get_import_status", {"handle": handle}),
            lambda status: bool(commits(status)) and commits(status)[-1]["status"] != "in_progress",
            TIMEOUT,
            what="the commit to stop",
        )
        [*_, last] = commits(status)
        assert last["status"] == "cancelled"
        assert status["status"] == "open"  # still open: the records can be committed later
        operation = await call(client, "get_operation_status", {"operation_id": last["operation_id"]})
        assert operation["status"] == "cancelled"

    assert legacy_engine.committed_batches() == []


# --- raw framing ---------------------------------------------------------------------------------


@pytest.fixture
def raw_server(server_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with stdio_process(server_env, tmp_path) as process:
        yield process


def raw_meta() -> dict[str, Any]:
    return modern_meta(**{"io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"}})


def test_stdout_carries_only_json_rpc_lines(raw_server: subprocess.Popen[bytes]) -> None:
    send_line(
        raw_server,
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": raw_meta()}},
    )
    discover = json.loads(read_line(raw_server))
    assert discover["jsonrpc"] == "2.0"
    assert discover["id"] == 1
    assert PROTOCOL_VERSION in discover["result"]["supportedVersions"]

    send_line(
        raw_server, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": raw_meta()}}
    )
    tools = json.loads(read_line(raw_server))
    assert tools["id"] == 2
    assert any(tool["name"] == "begin_import" for tool in tools["result"]["tools"])

    # On end of input the server exits; nothing else may have been written to stdout.
    assert raw_server.stdin is not None and raw_server.stdout is not None
    raw_server.stdin.close()
    assert raw_server.wait(timeout=TIMEOUT) == 0
    for line in raw_server.stdout.read().splitlines():
        if line.strip():
            assert json.loads(line)["jsonrpc"] == "2.0"


@pytest.fixture
def modern_only_server(server_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with stdio_process({**server_env, "ADAPTER_PROTOCOL_ERAS": "modern"}, tmp_path) as process:
        yield process


def _initialize(request_id: int) -> dict[str, Any]:
    return {**LEGACY_INITIALIZE, "id": request_id}


def test_modern_only_refuses_the_handshake_and_everything_after_it(
    modern_only_server: subprocess.Popen[bytes],
) -> None:
    """A refused initialize followed by notifications/initialized must not open a half-served session."""
    send_line(modern_only_server, _initialize(7))
    reply = json.loads(read_line(modern_only_server))
    assert reply["id"] == 7
    assert "result" not in reply
    assert reply["error"]["code"] == -32022
    assert reply["error"]["data"]["supported"] == [PROTOCOL_VERSION]
    assert reply["error"]["data"]["requested"] == "2025-11-25"
    assert PROTOCOL_VERSION in reply["error"]["message"]

    send_line(modern_only_server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    send_line(
        modern_only_server,
        {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {"name": "begin_import", "arguments": {"target": "customers"}},
        },
    )
    refused = json.loads(read_line(modern_only_server))
    assert refused["id"] == 8
    assert "result" not in refused
    assert refused["error"]["code"] == -32022
    assert refused["error"]["data"]["supported"] == [PROTOCOL_VERSION]


def test_the_first_message_fixes_the_era_of_a_stdio_connection(
    raw_server: subprocess.Popen[bytes],
) -> None:
    """Both eras served, but never on one connection: a modern opening refuses a later initialize."""
    send_line(
        raw_server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": raw_meta()}}
    )
    assert json.loads(read_line(raw_server))["result"]["tools"]
    send_line(raw_server, _initialize(2))
    reply = json.loads(read_line(raw_server))
    assert reply["id"] == 2
    assert reply["error"]["code"] == -32022
    assert reply["error"]["data"]["supported"] == [PROTOCOL_VERSION]


def test_a_legacy_opening_refuses_a_later_2026_request(raw_server: subprocess.Popen[bytes]) -> None:
    send_line(raw_server, _initialize(1))
    assert json.loads(read_line(raw_server))["result"]["protocolVersion"] == "2025-11-25"
    send_line(raw_server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    send_line(
        raw_server, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": raw_meta()}}
    )
    reply = json.loads(read_line(raw_server))
    assert reply["id"] == 2
    assert "result" not in reply
    assert reply["error"]["code"] == -32022
    assert reply["error"]["data"] == {
        "supported": ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
        "requested": "2026-07-28",
    }
    assert "2025-11-25" in reply["error"]["message"]
    # the connection stays what it opened as
    send_line(raw_server, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert json.loads(read_line(raw_server))["result"]["tools"]


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # resources/subscribe
async def test_a_legacy_client_runs_the_whole_flow_over_stdio_with_one_confirmation(
    server_env: dict[str, str], tmp_path: Path, legacy_engine: LegacyEngine
) -> None:
    server_env["ADAPTER_CONFIRM_COMMIT"] = "when-supported"
    asked: list[str] = []
    progress: list[float] = []
    updates: list[str] = []

    async def confirm(ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True})

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            updates.append(str(message.params.uri))

    client = stdio_client(
        server_env, tmp_path, mode="legacy", elicitation_callback=confirm, message_handler=on_message
    )
    async with client:
        assert client.session.protocol_version == "2025-11-25"
        begun = await call(client, "begin_import", {"target": "customers"})
        uri = f"import://{begun['handle']}"
        await client.subscribe_resource(uri)
        await call(client, "add_records", {"handle": begun["handle"], "records": records(25)})
        done = await call(client, "commit_import", {"handle": begun["handle"]}, progress_callback=on_progress)
        with anyio.fail_after(10):
            while uri not in updates:
                await anyio.sleep(0.05)
    assert done["status"] == "committed"
    assert len(asked) == 1 and "25 staged records" in asked[0]
    assert progress and progress[-1] == 25
    assert len(legacy_engine.committed_batches()) == 1
