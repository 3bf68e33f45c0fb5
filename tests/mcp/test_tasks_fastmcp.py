"""The Tasks extension through a client someone else wrote: FastMCP 4 with ``fastmcp-tasks``.

The client runs in its own virtual environment (``.venv-fastmcp``, from the pinned
``tests/tasks_clients/fastmcp-requirements.txt`` by ``make tasks-clients``), as a subprocess
driving ``tests/tasks_clients/fastmcp_client.py`` against a real server with the simulator over
TCP. Without that environment these tests skip and say so. The raw wire is in ``test_tasks.py``.
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
PYTHON = ROOT / ".venv-fastmcp" / "bin" / "python"
DRIVER = ROOT / "tests" / "tasks_clients" / "fastmcp_client.py"
needs_fastmcp = pytest.mark.skipif(
    not PYTHON.exists(), reason="FastMCP client not installed: run `make tasks-clients` (.venv-fastmcp)"
)


def drive(scenario: str, server: Any, *extra: str) -> dict[str, Any]:
    """Run one scenario of the driver; its last stdout line is what the client saw."""
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


def task_requests(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [sent for sent in out["wire"] if sent["method"].startswith("tasks/")]


@needs_fastmcp
async def test_a_commit_is_a_task_that_goes_working_then_completed_with_the_result(
    server: Any, legacy_engine: Any
) -> None:
    legacy_engine.update_faults(latency_ms=30)  # about a second of records
    out = await run("lifecycle", server, "--records", "30")
    legacy_engine.update_faults(latency_ms=0)

    created, seen = out["created"], out["seen"]
    task_id = created["taskId"]
    assert out["protocol"] == "2026-07-28"
    assert (created["resultType"], created["status"]) == ("task", "working")
    assert seen[0]["status"] == "working" and "records sent" in seen[0]["message"]
    assert [s["status"] for s in seen if s["status"] != "working"] == ["completed"], seen
    assert out["final"]["result"]["structuredContent"] == out["result"], "the tool result, inlined"
    assert (out["result"]["status"], out["result"]["operation_id"]) == ("committed", task_id)
    assert out["transparent"]["status"] == "committed", "call_tool drives the task without showing it"
    polled = {sent["task_id"] for sent in task_requests(out)}
    assert polled == {task_id, out["transparent"]["operation_id"]}, "both commits were tasks"
    assert {sent["mcp_name"] for sent in task_requests(out)} <= {None, *polled}
    assert [b["record_count"] for b in legacy_engine.committed_batches()] == [30, 2]


@needs_fastmcp
async def test_tasks_cancel_before_commit_leaves_nothing_in_the_legacy_system(
    server: Any, legacy_engine: Any
) -> None:
    legacy_engine.update_faults(latency_ms=100)  # six seconds of records
    out = await run("cancel", server, "--records", "60", "--cancel-after", "0.5")
    legacy_engine.update_faults(latency_ms=0)

    assert out["before"] == "working"
    assert out["final"] == "cancelled" and "nothing was committed" in out["message"]
    assert out["raised"] == f"Task {out['task_id']} was cancelled"
    assert out["import"] == "open", "the import can be committed again"
    assert [sent["method"] for sent in task_requests(out)].count("tasks/cancel") == 1
    assert legacy_engine.committed_batches() == []


@needs_fastmcp
async def test_another_principals_task_id_is_refused_like_an_unknown_one(server: Any) -> None:
    out = await run("foreign", server, "--bob-token", server.bob_token)

    assert out["foreign_status"] == out["unknown_status"]
    assert out["foreign_status"]["code"] == -32602
    assert out["foreign_cancel"] == out["unknown_cancel"] and out["foreign_cancel"]["code"] == -32602
    assert out["owner_after"] == "completed", "Bob's cancel changed nothing"


@needs_fastmcp
async def test_a_commit_that_needs_confirmation_asks_first_then_becomes_a_task(
    server: Any, legacy_engine: Any
) -> None:
    out = await run("confirm", server, "--records", "3")

    assert "Server returned InputRequiredResult" in out["explicit"], "call_tool_task cannot confirm"
    [question] = out["asked"]
    assert "3 staged records" in question and '"customers"' in question
    methods = [sent["method"] for sent in out["commit_wire"]]
    assert methods[:2] == ["tools/call", "tools/call"] and set(methods[2:]) == {"tasks/get"}, methods
    assert out["asked_after"] == [1], "asked between the first commit_import and its retry"
    assert out["commit_wire"][2]["task_id"] == out["result"]["operation_id"], "the retry became a task"
    assert out["result"]["status"] == "committed"
    assert len(legacy_engine.committed_batches()) == 1


@needs_fastmcp
async def test_a_task_created_on_one_worker_is_followed_to_its_end_on_another(
    server: Any, other_server: Any, legacy_engine: Any
) -> None:
    legacy_engine.update_faults(latency_ms=50)  # two seconds of records
    out = await run("elsewhere", server, "--records", "40", "--other-url", other_server.url)
    legacy_engine.update_faults(latency_ms=0)

    assert out["seen"][0]["status"] == "working", "the other worker saw it running"
    assert out["seen"][-1]["status"] == "completed"
    assert (out["result"]["status"], out["result"]["operation_id"]) == ("committed", out["task_id"])
    assert len(legacy_engine.committed_batches()) == 1
