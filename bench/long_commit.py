"""Benchmark: a 100,000-record commit into a slow legacy system, answered in the background.

Issue 20: "Time to the first answer of a 100,000-record commit into a slow legacy system: at most
the wait plus 0.5 s; background throughput within 5% of the synchronous commit's, in one run."

What runs
---------
* The simulator as its own process over TCP (``bench/harness.py``) with ``--latency-ms`` per
  command, so per record (0.1 ms by default: about 15 s for 100,000 records).
* Two servers in this process, on one fresh SQLite database (or PostgreSQL), each ``create_app`` on
  uvicorn: **background** with the default wait budget (``ADAPTER_COMMIT_WAIT_SECONDS=4``), which
  answers ``in_progress`` and is then followed with ``get_operation_status`` (``wait_seconds=4``)
  until the commit has landed; **synchronous** with a budget longer than the commit
  (``ADAPTER_COMMIT_WAIT_SECONDS=60``), where the one ``commit_import`` call waits for the outcome,
  as every commit did before.
* Each round stages a fresh import of ``--records`` records per server (through the service layer,
  not timed), then commits it through the SDK client over HTTP. Rounds alternate the order (ABBA),
  so drift in machine load hits both alike.

Printed: one JSON line with, per mode, the median time to the first answer and to the commit's
end, records per second, the background/synchronous throughput ratio, and whether the two targets
hold. Usage::

    .venv/bin/python bench/long_commit.py                  # SQLite, 100,000 records, 2 rounds
    .venv/bin/python bench/long_commit.py --db postgres --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.bootstrap import Kit, build  # noqa: E402
from adapter.config import load_settings  # noqa: E402
from adapter.domain.identity import Principal  # noqa: E402
from adapter.entrypoints.http.app import create_app  # noqa: E402
from bench.harness import fresh_database  # noqa: E402
from legacy_sim.process import running_simulator  # noqa: E402

LOCAL = Principal("local", "local")
WAIT = 4.0


@contextlib.asynccontextmanager
async def served(kit: Kit) -> AsyncIterator[str]:
    config = uvicorn.Config(create_app(kit), host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task


def stage(kit: Kit, records: int) -> str:
    handle = kit.service.begin(LOCAL, "customers").handle
    for start in range(0, records, 1000):
        batch = [{"id": i, "name": f"customer {i}"} for i in range(start, min(records, start + 1000))]
        kit.service.add(LOCAL, handle, batch)
    return handle


async def commit(url: str, handle: str, key: str) -> dict[str, Any]:
    """One commit through the SDK client: the first answer, then following it to its end."""
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(120.0)) as http,
        Client(streamable_http_client(url, http_client=http), cache=None, read_timeout_seconds=120) as client,
    ):
        started = time.perf_counter()
        first = (
            await client.call_tool("commit_import", {"handle": handle, "idempotency_key": key})
        ).structured_content
        answered = time.perf_counter() - started
        assert first is not None
        status, polls = first["status"], 0
        while status == "in_progress":
            arguments = {"operation_id": first["operation_id"], "wait_seconds": WAIT}
            view = (await client.call_tool("get_operation_status", arguments)).structured_content
            assert view is not None
            status = "committed" if view["status"] == "succeeded" else view["status"]
            polls += 1
        ended = time.perf_counter() - started
    assert status == "committed", status
    return {"first_answer": first["status"], "first_answer_s": answered, "total_s": ended, "polls": polls}


async def run(
    args: argparse.Namespace, workdir: Path, database_url: str, legacy: tuple[str, int]
) -> dict[str, Any]:
    def kit_with(wait: float) -> Kit:
        settings = load_settings(
            database_url=database_url,
            legacy_url=f"tcp://{legacy[0]}:{legacy[1]}",
            secret="bench-long-commit-" + "s" * 32,
            secret_file=str(workdir / "unused.secret"),
            commit_wait_seconds=wait,
            legacy_timeout_seconds=30.0,
            unknown_grace_seconds=60.0,
            max_records_per_import=max(args.records, 100_000),
        )
        return build(settings)

    kits = {"background": kit_with(WAIT), "synchronous": kit_with(60.0)}
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in kits}
    try:
        async with served(kits["background"]) as background, served(kits["synchronous"]) as synchronous:
            urls = {"background": background, "synchronous": synchronous}
            for round_ in range(args.rounds):
                order = ["background", "synchronous"] if round_ % 2 == 0 else ["synchronous", "background"]
                for mode in order:
                    handle = await asyncio.to_thread(stage, kits[mode], args.records)
                    results[mode].append(await commit(urls[mode], handle, f"{mode}-{round_}"))
    finally:
        for kit in kits.values():
            kit.close()
    summary: dict[str, Any] = {}
    for mode, runs in results.items():
        total = statistics.median(r["total_s"] for r in runs)
        summary[mode] = {
            "first_answer": sorted({r["first_answer"] for r in runs}),
            "first_answer_s": round(statistics.median(r["first_answer_s"] for r in runs), 3),
            "total_s": round(total, 3),
            "records_per_s": round(args.records / total, 1),
            "polls": statistics.median(r["polls"] for r in runs),
        }
    ratio = summary["background"]["records_per_s"] / summary["synchronous"]["records_per_s"]
    first = max(r["first_answer_s"] for r in results["background"])
    return {
        "bench": "long_commit",
        "db": args.db,
        "records": args.records,
        "latency_ms": args.latency_ms,
        "rounds": args.rounds,
        "wait_seconds": WAIT,
        **summary,
        "throughput_ratio": round(ratio, 3),
        "targets": {
            "first_answer_within_wait_plus_0_5_s": first <= WAIT + 0.5,
            "throughput_within_5_percent": ratio >= 0.95,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--latency-ms", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="long-commit-") as tmp:
        workdir = Path(tmp)
        simulator = running_simulator(
            workdir / "legacy.db", "--idle-timeout", "0", "--latency-ms", str(args.latency_ms)
        )
        with simulator as legacy, fresh_database(args.db, workdir) as database_url:
            print(json.dumps(asyncio.run(run(args, workdir, database_url, legacy))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
