"""The Tasks extension through strands-agents' MCP client (``MCPClient`` with ``tasks_config``).

strands-agents pins ``mcp<2.2``, so it runs in its own virtual environment (``.venv-strands``,
from the pinned ``tests/tasks_clients/strands-requirements.txt`` by ``make tasks-clients``), as a
subprocess driving ``tests/tasks_clients/strands_client.py`` against a real server with the
simulator over TCP. Without that environment these tests skip and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # client subprocesses

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-strands" / "bin" / "python"
DRIVER = ROOT / "tests" / "tasks_clients" / "strands_client.py"
needs_strands = pytest.mark.skipif(
    not PYTHON.exists(), reason="strands-agents not installed: run `make tasks-clients` (.venv-strands)"
)


def drive(scenario: str, server: Any, *extra: str) -> dict[str, Any]:
    command = [str(PYTHON), str(DRIVER), scenario, "--url", server.url, "--token", server.alice_token, *extra]
    done = subprocess.run(command, cwd=ROOT, env={**os.environ}, capture_output=True, timeout=120)
    lines = done.stdout.decode().strip().splitlines()
    assert lines, done.stderr.decode()[-3000:]
    out: dict[str, Any] = json.loads(lines[-1])
    assert "fatal" not in out, (out["fatal"], done.stderr.decode()[-3000:])
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return out


async def run(scenario: str, server: Any, *extra: str) -> dict[str, Any]:
    return await anyio.to_thread.run_sync(drive, scenario, server, *extra)


@needs_strands
async def test_a_commit_is_a_task_that_goes_working_then_completed_with_the_result(
    server: Any, legacy_engine: Any
) -> None:
    legacy_engine.update_faults(latency_ms=30)
    out = await run("lifecycle", server, "--records", "30")
    legacy_engine.update_faults(latency_ms=0)

    task_id = out["created"]["taskId"]
    assert (out["created"]["resultType"], out["created"]["status"]) == ("task", "working")
    assert out["seen"][0]["status"] == "working"
    assert [s["status"] for s in out["seen"] if s["status"] != "working"] == ["completed"]
    assert (out["result"]["status"], out["result"]["operation_id"]) == ("committed", task_id)
    assert out["transparent"]["status"] == "committed", "call_tool_sync drives the task itself"
    polled = [sent for sent in out["wire"] if sent["method"] == "tasks/get"]
    assert {sent["task_id"] for sent in polled} == {task_id, out["transparent"]["operation_id"]}
    assert all(sent["mcp_name"] == sent["task_id"] for sent in polled), "strands sends the routing header"
    assert [b["record_count"] for b in legacy_engine.committed_batches()] == [30, 2]


@needs_strands
async def test_tasks_cancel_before_commit_leaves_nothing_in_the_legacy_system(
    server: Any, legacy_engine: Any
) -> None:
    legacy_engine.update_faults(latency_ms=100)
    out = await run("cancel", server, "--records", "60", "--cancel-after", "0.5")
    legacy_engine.update_faults(latency_ms=0)

    assert (out["before"], out["final"]) == ("working", "cancelled")
    assert out["import"] == "open"
    assert legacy_engine.committed_batches() == []


@needs_strands
async def test_another_principals_task_id_is_refused_like_an_unknown_one(server: Any) -> None:
    out = await run("foreign", server, "--bob-token", server.bob_token)

    assert out["foreign_get"] == out["unknown_get"] and out["foreign_get"]["code"] == -32602
    assert out["foreign_cancel"] == out["unknown_cancel"] and out["foreign_cancel"]["code"] == -32602


@needs_strands
async def test_a_commit_that_needs_confirmation_asks_first_then_becomes_a_task(
    server: Any, legacy_engine: Any
) -> None:
    out = await run("confirm", server, "--records", "3")

    [question] = out["asked"]
    assert "3 staged records" in question
    methods = [sent["method"] for sent in out["commit_wire"]]
    assert methods[:2] == ["tools/call", "tools/call"] and set(methods[2:]) == {"tasks/get"}, methods
    assert out["asked_after"] == [1]
    assert out["commit_wire"][2]["task_id"] == out["result"]["operation_id"]
    assert (out["is_error"], out["result"]["status"]) == (False, "committed")
    assert len(legacy_engine.committed_batches()) == 1
