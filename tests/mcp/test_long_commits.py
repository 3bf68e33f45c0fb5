"""Long commits through clients that others wrote, with the request timeouts they ship with.

A commit of 3,000 records into a legacy system that takes 40 ms a record runs two minutes. The
TypeScript SDK 1.x (default options: a 60 s request timeout that progress does not reset), the
TypeScript v2 client at 2026-07-28, and a 1.x client with the 5 s timeout openai-agents uses, all
at once against one server: each gets ``in_progress`` well inside its timeout, follows the commit
with ``get_operation_status`` (``wait_seconds``) without ever timing out, and sees it land: one
batch each, with every record. ``tests/node/long_commit.mjs`` is the client side.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import anyio
import anyio.to_thread
import pytest

from tests.mcp.test_node_clients import NODE, NODE_DIR, needs_node

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # two minutes of Node subprocesses

SCRIPT = NODE_DIR / "long_commit.mjs"
RECORDS = 3000
LATENCY_MS = 40  # per legacy command, so per record: 120 s of records
CLIENTS = {"v1 defaults": ("v1", None), "v2 defaults": ("v2", None), "v1 5 s timeout": ("v1", 5000)}


def run_client(sdk: str, timeout_ms: int | None, url: str, token: str) -> dict[str, Any]:
    command = [str(NODE), str(SCRIPT), "--sdk", sdk, "--records", str(RECORDS)]
    if timeout_ms is not None:
        command += ["--timeout", str(timeout_ms)]
    done = subprocess.run(
        command,
        cwd=NODE_DIR,
        env={**os.environ, "MCP_URL": url, "MCP_TOKEN": token},
        capture_output=True,
        timeout=400,
        check=False,
    )
    lines = done.stdout.decode().strip().splitlines()
    assert lines, done.stderr.decode()[-2000:]
    out: dict[str, Any] = json.loads(lines[-1])
    assert "fatal" not in out, out["fatal"]
    return out


@needs_node
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # minutes: one database is enough
async def test_a_two_minute_commit_lands_through_clients_with_60_s_and_5_s_timeouts(
    server: Any, legacy_engine: Any
) -> None:
    legacy_engine.update_faults(latency_ms=LATENCY_MS)
    outs: dict[str, dict[str, Any]] = {}

    async def one(name: str, sdk: str, timeout_ms: int | None) -> None:
        outs[name] = await anyio.to_thread.run_sync(
            run_client, sdk, timeout_ms, server.url, server.alice_token
        )

    async with anyio.create_task_group() as clients:
        for name, (sdk, timeout_ms) in CLIENTS.items():
            clients.start_soon(one, name, sdk, timeout_ms)
    legacy_engine.update_faults(latency_ms=0)

    for name, out in outs.items():
        limit = out["timeout"] or 60_000
        assert out["first"]["status"] == "in_progress", (name, out)
        assert out["answerMs"] < 4_000 + 1_500, (name, "in_progress comes after the wait budget, not later")
        assert out["answerMs"] < limit and out["slowestPollMs"] < limit, (name, out)
        assert "get_operation_status" in out["first"]["message"], "the model is told what to call next"
        assert out["final"] == "succeeded", (name, out)
        assert out["totalMs"] > RECORDS * LATENCY_MS * 0.9, "it really ran for minutes in the background"
        assert out["progress"] == sorted(out["progress"]) and out["progress"][-1] > 0, (name, out["progress"])
        assert out["repeat"] == "committed", "a repeat with the same key answers the commit"
        assert out["result"]["record_count"] == RECORDS
    batches = legacy_engine.committed_batches()
    assert len(batches) == len(CLIENTS), "exactly one batch per import"
    assert all(batch["record_count"] == RECORDS for batch in batches)
