"""How soon a listen stream on worker A hears a change committed on worker B (PostgreSQL NOTIFY).

Two kit processes (``python -m adapter serve``, one port each, as two hosts) on one fresh PostgreSQL
schema and one simulator over TCP, local mode with one shared ``ADAPTER_SECRET``. For each of
``--samples`` imports: ``begin_import`` on B, ``subscriptions/listen`` for it on A (the SDK client),
``abort_import`` on B (one transaction, so one change); the latency is from B's answer arriving to
A's ``notifications/resources/updated`` arriving (0 when the update came first). The event table is
only re-read on a timer every ``ADAPTER_EVENT_CATCH_UP_SECONDS``; set to 5 s here so the figures show
the NOTIFY path, not the timer.

Target (issue 13): p99 <= 100 ms on loopback.

Usage: ``.venv/bin/python bench/feed_latency.py [--samples 100]``; prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import DEFAULT_POSTGRES_URL, fresh_database, simulator
from load import _free_port, call, running


async def sample(on_a: Client, http: httpx.AsyncClient, url_b: str) -> float:
    handle = (await call(http, url_b, "begin_import", {"target": "customers"}))["handle"]
    uri = f"import://{handle}"
    async with on_a.listen(resource_subscriptions=[uri]) as subscription:
        received: list[float] = []

        async def hear() -> None:
            update = await subscription.__anext__()
            assert update.uri == uri
            received.append(time.perf_counter())

        listener = asyncio.create_task(hear())
        await asyncio.sleep(0.02)
        await call(http, url_b, "abort_import", {"handle": handle})
        answered = time.perf_counter()
        await asyncio.wait_for(listener, timeout=10)
    return max(0.0, received[0] - answered)


async def measure(url_a: str, url_b: str, samples: int) -> list[float]:
    latencies: list[float] = []
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0)) as http2,
        Client(streamable_http_client(url_a, http_client=http2), cache=None) as on_a,
        httpx.AsyncClient(timeout=30) as http,
    ):
        for _ in range(3):  # warm-up
            await sample(on_a, http, url_b)
        for _ in range(samples):
            latencies.append(await sample(on_a, http, url_b))
    return latencies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-feed-") as tmp:
        workdir = Path(tmp)
        with simulator(workdir) as (host, port), fresh_database("postgres", workdir, args.postgres_url) as db:
            env = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}
            env.update(
                ADAPTER_DATABASE_URL=db,
                ADAPTER_LEGACY_URL=f"tcp://{host}:{port}",
                ADAPTER_SECRET=secrets.token_hex(32),
                ADAPTER_EVENT_CATCH_UP_SECONDS="5",
            )
            port_a, port_b = _free_port(), _free_port()
            serve = [sys.executable, "-m", "adapter", "serve", "--port"]
            with (
                running([*serve, str(port_a)], env, port_a, workdir / "a.log") as (url_a, _),
                running([*serve, str(port_b)], env, port_b, workdir / "b.log") as (url_b, _),
            ):
                latencies = asyncio.run(measure(url_a, url_b, args.samples))
    ms = sorted(1000 * x for x in latencies)
    summary: dict[str, Any] = {
        "bench": "feed_latency",
        "samples": len(ms),
        "p50_ms": statistics.median(ms),
        "p99_ms": ms[min(len(ms) - 1, int(0.99 * len(ms)))],
        "max_ms": ms[-1],
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(
        f"listen on A hears an abort answered on B, {summary['samples']} samples, "
        f"load {summary['loadavg_before']}"
    )
    print(
        f"p50 {summary['p50_ms']:.1f} ms, p99 {summary['p99_ms']:.1f} ms, max {summary['max_ms']:.1f} ms "
        "(target p99 <= 100 ms)"
    )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
