"""SIGKILL the worker that runs a background commit: another worker finishes it from its recovery point.

A real ``python -m adapter serve`` process answers ``commit_import`` with ``in_progress`` (a one
second wait budget, a slow simulator) and goes on committing in the background; it is killed with
SIGKILL in the middle of the replay. On SQLite the worker is started again (a restart); on
PostgreSQL a second worker that runs beside it takes over. Either way the commit is resumed once its
lease runs out, replayed from the start in a new legacy session, and lands: one batch with every
record, the operation ``succeeded``, nothing left running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from legacy_sim.engine import LegacyEngine
from tests.support.constants import ALICE_TOKEN, SECRET
from tests.support.kit import write_tokens
from tests.support.mcp import mcp_headers, modern_meta, parse_body
from tests.support.servers import free_port, stop_process
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow  # real server processes

RECORDS = 120
LATENCY_MS = 25  # three seconds of records a replay


class Worker:
    def __init__(self, name: str, env: dict[str, str], workdir: Path) -> None:
        self.port = free_port()
        self.log = workdir / f"{name}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adapter", "serve", "--port", str(self.port)],
            cwd=workdir,
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-2000:]
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError(f"worker {name} did not start: {self.log.read_text()[-2000:]}")

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": modern_meta()},
        }
        headers = mcp_headers("tools/call", tool, token=ALICE_TOKEN)
        answer = parse_body(httpx.post(self.url, json=message, headers=headers, timeout=60))
        result = answer["result"]
        assert not result.get("isError"), result
        return dict(result["structuredContent"])

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)


@pytest.fixture
def workers(
    db_url: str, store: Any, legacy_address: tuple[str, int], tmp_path: Path
) -> Iterator[tuple[str, Any]]:
    host, port = legacy_address
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}
    env.update(
        {
            "ADAPTER_DATABASE_URL": db_url,
            "ADAPTER_LEGACY_URL": f"tcp://{host}:{port}",
            "ADAPTER_SECRET": SECRET,
            "ADAPTER_TOKENS": str(write_tokens(tmp_path / "tokens.json")),
            "ADAPTER_COMMIT_WAIT_SECONDS": "1",
            "ADAPTER_LEASE_SECONDS": "2",
            "ADAPTER_RECONCILE_INTERVAL_SECONDS": "0.5",
            "ADAPTER_COMMIT_CHUNK_SIZE": "50",
        }
    )
    started: list[Worker] = []

    def start(name: str) -> Worker:
        worker = Worker(name, env, tmp_path)
        started.append(worker)
        return worker

    try:
        yield db_url, start
    finally:
        for worker in started:
            stop_process(worker.process, 15)


def test_a_killed_worker_s_background_commit_is_finished_by_the_next_worker(
    workers: tuple[str, Any], legacy_engine: LegacyEngine
) -> None:
    db_url, start = workers
    on_postgres = db_url.startswith("postgresql")
    first = start("first")
    beside = start("beside") if on_postgres else None  # PostgreSQL: several workers on one database
    handle = first.call("begin_import", {"target": "customers"})["handle"]
    first.call("add_records", {"handle": handle, "records": [{"id": i} for i in range(RECORDS)]})
    legacy_engine.update_faults(latency_ms=LATENCY_MS)

    answered = first.call("commit_import", {"handle": handle, "idempotency_key": "bg"})
    assert answered["status"] == "in_progress", answered
    time.sleep(0.5)  # well inside the replay
    first.kill()
    finishing = beside if beside is not None else start("restarted")

    seen: list[dict[str, Any]] = []

    def settled() -> bool:
        asked = {"operation_id": answered["operation_id"], "wait_seconds": 2}
        seen.append(finishing.call("get_operation_status", asked))
        return seen[-1]["status"] != "in_progress"

    wait_until(settled, timeout=60, what="the resumed commit to land")
    final = seen[-1]
    legacy_engine.update_faults(latency_ms=0)

    assert final["status"] == "succeeded", json.dumps(final)
    events = [entry["event"] for entry in final["history"]]
    assert "operation.resumed" in events
    [batch] = legacy_engine.committed_batches()
    assert [record["id"] for record in batch["records"]] == list(range(RECORDS)), (
        "every record, once, in order"
    )
    assert finishing.call("get_import_status", {"handle": handle})["status"] == "committed"
