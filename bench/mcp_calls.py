"""Benchmark: MCP ``tools/call`` throughput over HTTP, ``get_import_status`` against a no-op tool.

The issue: "Sequential and 8-way concurrent ``tools/call`` of ``get_import_status`` against a no-op
tool on the same server, and ``add_records`` of 500-record batches over HTTP. Record calls/s,
records/s and the ratio to the no-op tool. Target: the status tool costs at most 1.3x the no-op tool."

What runs where
---------------
* **The server runs in a child process** (this same file with ``--child``): ``adapter.bootstrap.build``
  on a fresh migrated database, ``create_app(kit)`` (maintenance loop and event feed on, as deployed),
  uvicorn on ``127.0.0.1:0`` with the production logging set-up (``configure_logging``: one JSON line
  per request, here into a file in the temp dir). A separate process rather than uvicorn on the
  client's event loop (as ``tests/mcp/conftest.py`` does) so the SDK client's own CPU is not charged to
  the server's loop: with 2 cores each side gets about one, like a client on another machine.
* **The no-op tool exists only here.** The child adds a ``noop`` :class:`~adapter.entrypoints.mcp.tools.Tool`
  to ``app.state.gateway.tools`` the way ``build_tools`` registers the real ones. It takes the same
  arguments as ``get_import_status`` (``handle``) and returns a one-field output model at once, with
  no thread hop and no database. Both tools therefore share everything else: HTTP, auth, the SDK's
  dispatch and middleware (request log, metrics hook, requestState boundary), input validation,
  ``Call`` construction, result serialization, and client-side output-schema validation.
* **Clients** are ``mcp.Client`` over ``streamable_http_client`` with an ``httpx2.AsyncClient`` (as
  in ``conftest.Running.client``, ``cache=None``), all on this process's event loop.
* The legacy system: ``--legacy embedded`` (default; the simulator in the server process) or ``tcp``
  (the simulator as a child process over loopback, as in ``bench/core_import.py``). Neither
  ``get_import_status`` nor ``add_records`` talks to it; only the one set-up commit does.
* Auth: ``--auth local`` (default; no token) or ``tokens`` (a token file, bearer token per request).

What it measures, interleaved round by round (order flipped every round: ABBA...) so drift in
machine load hits both tools alike:

1. sequential: one client, ``--calls`` calls of each tool per round;
2. concurrent: ``--concurrency`` clients (own HTTP connection each), ``--calls-concurrent`` calls
   each per tool per round;
3. ``add_records``: a fresh import per round, ``--batches`` calls of ``--batch`` records each.

The status tool reads a committed import (begin, 10 records, commit: three operations), so the
SELECT of its operations is not empty. Alongside the client figures the script reads the server's
own request log (``duration_ms`` of each request, measured by ``RequestLog``, the outermost SDK
middleware) and times ``ImportService.status`` directly and one ``anyio.to_thread`` hop in this
process, to say where a difference comes from. ``--profile-server PATH`` adds two untimed windows
under cProfile in the server (status, then noop; ``PATH.status`` / ``PATH.noop``).

Usage::

    .venv/bin/python bench/mcp_calls.py                      # about a minute, SQLite, embedded, local
    .venv/bin/python bench/mcp_calls.py --db postgres --legacy tcp --auth tokens
    .venv/bin/python bench/mcp_calls.py --profile-server /tmp/mcp_calls.prof

This is a benchmark, not a test: it prints a table and one JSON line (the last line of stdout).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import platform
import pstats
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from adapter.bootstrap import build
from adapter.config import load_settings
from adapter.domain.identity import Principal
from legacy_sim.process import stop_process

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_import import DEFAULT_POSTGRES_URL, DatabaseFactory, make_records, simulator

REPO = Path(__file__).resolve().parents[1]
TOKEN = "bench-token-" + secrets.token_hex(16)
STATUS, NOOP = "get_import_status", "noop"
TIMEOUT = 60.0


# --- the server child ------------------------------------------------------------------------------


class NoopIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    handle: str = Field(min_length=1, max_length=100)


class NoopOut(BaseModel):
    ok: bool


async def _noop(call: Any, args: NoopIn) -> NoopOut:
    return NoopOut(ok=True)


def noop_tool() -> Any:
    from adapter.entrypoints.mcp.tools import Tool

    hints = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    return Tool(NOOP, "No-op", "Benchmark only: returns at once.", NoopIn, NoopOut, hints, _noop)


def child_main(config: dict[str, Any]) -> int:
    """Serve create_app(kit) (+ noop) on 127.0.0.1:0; print 'PORT n' on stdout once listening.

    SIGUSR1 starts a cProfile of the event-loop thread (worker threads are not seen); SIGUSR2 stops
    it and dumps it to the next name in ``config['profile_names']``.
    """
    import uvicorn

    from adapter.entrypoints.http.app import create_app
    from adapter.entrypoints.serve import configure_logging

    configure_logging()  # as `python -m adapter serve`: one JSON log line per request on stderr
    settings = load_settings(**config["settings"])
    kit = build(settings)
    app = create_app(kit)
    app.state.gateway.tools[NOOP] = noop_tool()

    profiles = iter(config.get("profile_names") or [])
    profiler: list[cProfile.Profile] = []

    def start_profile() -> None:
        profiler[:] = [cProfile.Profile()]
        profiler[0].enable()

    def stop_profile() -> None:
        if profiler:
            profiler[0].disable()
            profiler.pop().dump_stats(next(profiles))
            print("PROFILED", flush=True)

    async def run() -> None:
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        )
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, start_profile)
        loop.add_signal_handler(signal.SIGUSR2, stop_profile)
        print(f"PORT {server.servers[0].sockets[0].getsockname()[1]}", flush=True)
        await task

    try:
        asyncio.run(run())
    finally:
        kit.close()
    return 0


@contextlib.contextmanager
def server_process(config: dict[str, Any], log_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(config)]
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"server did not start (exit {proc.poll()}); see {log_path}: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp", proc
    finally:
        stop_process(proc, timeout=15)


# --- clients ---------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    """``mode="legacy"``: a 2025-11-25 session (initialize handshake, Mcp-Session-Id)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT)) as http,
        Client(
            streamable_http_client(url, http_client=http),
            cache=None,
            read_timeout_seconds=TIMEOUT,
            mode=mode,  # type: ignore[arg-type]
        ) as client,
    ):
        yield client


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    if result.is_error or not isinstance(result.structured_content, dict):
        raise RuntimeError(f"{name} failed: {result.content}")
    return result.structured_content


async def committed_handle(client: Client) -> str:
    """begin + 10 records + commit: an import whose status lists three operations."""
    handle = (await call(client, "begin_import", {"target": "bench"}))["handle"]
    await call(client, "add_records", {"handle": handle, "records": make_records(10)})
    committed = await call(client, "commit_import", {"handle": handle})
    if committed["status"] != "committed":
        raise RuntimeError(f"set-up commit ended {committed['status']}")
    status = await call(client, STATUS, {"handle": handle})
    assert status["status"] == "committed" and len(status["operations"]) == 3, status
    return handle


# --- the server's request log ----------------------------------------------------------------------


class ServerLog:
    """Reads the child's JSON request lines written since the last mark."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size

    def durations_ms(self, tool: str) -> list[float]:
        with self.path.open() as f:
            f.seek(self.offset)
            lines = f.read().splitlines()
        out = []
        for line in lines:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if entry.get("event") == "mcp.request" and entry.get("tool") == tool:
                    if entry.get("outcome") != "ok":
                        raise RuntimeError(f"server logged {entry}")
                    out.append(entry["duration_ms"])
        return out


# --- the measurements ------------------------------------------------------------------------------


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Tally:
    """Wall time, server CPU, client CPU and server-side durations, summed over many chunks."""

    def __init__(self) -> None:
        self.calls = 0
        self.wall = self.server_cpu = self.client_cpu = 0.0
        self.server_ms: list[float] = []

    def add(self, other: Tally) -> None:
        self.calls += other.calls
        self.wall += other.wall
        self.server_cpu += other.server_cpu
        self.client_cpu += other.client_cpu
        self.server_ms += other.server_ms

    def figures(self) -> dict[str, float]:
        return {
            "rate": self.calls / self.wall,
            "server_cpu_ms": self.server_cpu / self.calls * 1000,
            "client_cpu_ms": self.client_cpu / self.calls * 1000,
            "server_ms": statistics.median(self.server_ms),
        }


async def timed_block(
    log: ServerLog, pid: int, workers: Sequence[Callable[[], Awaitable[None]]], calls: int, tool: str
) -> Tally:
    """Run the workers concurrently and account for what it cost."""
    log.mark()
    cpu0, client0, started = process_cpu(pid), time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as tg:
        for worker in workers:
            tg.start_soon(worker)
    tally = Tally()
    tally.wall = time.perf_counter() - started
    tally.client_cpu = time.process_time() - client0
    tally.server_cpu = process_cpu(pid) - cpu0
    tally.calls = calls
    tally.server_ms = log.durations_ms(tool)
    if len(tally.server_ms) != calls:
        raise RuntimeError(
            f"expected {calls} {tool} requests in the server log, found {len(tally.server_ms)}"
        )
    return tally


def loop_worker(client: Client, tool: str, handle: str, n: int) -> Callable[[], Awaitable[None]]:
    async def work() -> None:
        for _ in range(n):
            await call(client, tool, {"handle": handle})

    return work


LEGACY = "@2025"  # suffix of the variants measured over 2025-11-25 sessions


async def compare(
    eras: dict[str, Sequence[Client]], log: ServerLog, pid: int, handle: str, per_client: int, chunk: int
) -> dict[str, dict[str, float]]:
    """One round: ``per_client`` calls of each variant (tool x era) per client, in chunks of ``chunk``
    calls per client, cycling through the variants and reversing the cycle every pass (ABCD DCBA ...),
    so load that comes and goes within the round hits every variant alike. ``eras`` maps "" (the
    2026-07-28 clients) and ``LEGACY`` (the 2025-11-25 clients) to their clients."""
    variants = [tool + era for era in eras for tool in (STATUS, NOOP)]
    tallies = {variant: Tally() for variant in variants}
    done = 0
    turn = 0
    while done < per_client:
        n = min(chunk, per_client - done)
        for variant in variants if turn % 2 == 0 else variants[::-1]:
            tool = variant.removesuffix(LEGACY)
            clients = eras[LEGACY if variant.endswith(LEGACY) else ""]
            workers = [loop_worker(c, tool, handle, n) for c in clients]
            tallies[variant].add(await timed_block(log, pid, workers, n * len(clients), tool))
        done += n
        turn += 1
    return {variant: t.figures() for variant, t in tallies.items()}


async def add_round(
    client: Client, log: ServerLog, pid: int, batches: list[list[dict[str, Any]]]
) -> dict[str, float]:
    handle = (await call(client, "begin_import", {"target": "bench-add"}))["handle"]

    async def work() -> None:
        for chunk in batches:
            added = await call(client, "add_records", {"handle": handle, "records": chunk})
            assert added["accepted"] == len(chunk)

    figures = (await timed_block(log, pid, [work], len(batches), "add_records")).figures()
    per_call = sum(len(b) for b in batches) / len(batches)
    return {
        "calls_s": figures["rate"],
        "records_s": figures["rate"] * per_call,
        "server_ms": figures["server_ms"],
        "server_cpu_ms": figures["server_cpu_ms"],
    }


def ratio_line(label: str, r: dict[str, dict[str, float]]) -> str:
    s, n = r[STATUS], r[NOOP]
    line = (
        f"{label} status {s['rate']:5.0f} noop {n['rate']:5.0f} calls/s ({n['rate'] / s['rate']:.2f}x; "
        f"server cpu {s['server_cpu_ms'] / n['server_cpu_ms']:.2f}x)"
    )
    if STATUS + LEGACY in r:
        old = r[STATUS + LEGACY]
        line += f" 2025 status {old['rate']:5.0f} ({s['rate'] / old['rate']:.2f}x of 2026)"
    return line


async def measure(
    args: argparse.Namespace, url: str, token: str | None, log: ServerLog, proc: subprocess.Popen[str]
) -> dict[str, Any]:
    batches = [make_records(args.batch, start=i * args.batch) for i in range(args.batches)]
    pid = proc.pid
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(mcp_client(url, token)) for _ in range(args.concurrency)]
        old = [
            await stack.enter_async_context(mcp_client(url, token, mode="legacy"))
            for _ in range(args.concurrency if args.eras == "both" else 0)
        ]
        seq_client = clients[0]
        handle = await committed_handle(seq_client)
        every = {"": clients, LEGACY: old} if old else {"": clients}
        first = {era: group[:1] for era, group in every.items()}
        # warm-up: every client, both tools (tools/list for output schemas, connections, caches)
        await compare(every, log, pid, handle, 20, 20)
        await add_round(seq_client, log, pid, batches[:2])

        rounds: list[dict[str, Any]] = []
        for r in range(args.rounds):
            seq = await compare(first, log, pid, handle, args.calls, args.chunk)
            conc = await compare(
                every, log, pid, handle, args.calls_concurrent, max(1, args.chunk // args.concurrency)
            )
            add = await add_round(seq_client, log, pid, batches)
            rounds.append({"sequential": seq, "concurrent": conc, "add_records": add})
            print(
                f"  round {r + 1}: {ratio_line('seq', seq)} | {ratio_line(f'{args.concurrency}-way', conc)}"
                f" | add_records {add['calls_s']:4.1f} calls/s {add['records_s']:6.0f} rec/s",
                flush=True,
            )

        profiles = None
        if args.profile_server:
            profiles = {}
            windows = [(seq_client, STATUS, "status"), (seq_client, NOOP, "noop")]
            if old:
                windows.append((old[0], STATUS, "status2025"))
            for client, tool, name in windows:
                proc.send_signal(signal.SIGUSR1)
                await anyio.sleep(0.2)
                await loop_worker(client, tool, handle, args.calls)()
                proc.send_signal(signal.SIGUSR2)
                await anyio.sleep(0.5)
                profiles[name] = f"{args.profile_server}.{name}"
    return {"handle": handle, "rounds": rounds, "profiles": profiles}


def direct_costs(
    settings: dict[str, Any], handle: str, principal: Principal, n: int = 2000
) -> dict[str, float]:
    """Microseconds per ImportService.status (same DB, in this process) and per anyio thread hop."""
    kit = build(load_settings(**settings))
    try:
        kit.service.status(principal, handle)
        started = time.perf_counter()
        for _ in range(n):
            kit.service.status(principal, handle)
        status_us = (time.perf_counter() - started) / n * 1e6
    finally:
        kit.close()

    async def hops() -> float:
        await anyio.to_thread.run_sync(lambda: None)
        started = time.perf_counter()
        for _ in range(n):
            await anyio.to_thread.run_sync(lambda: None)
        return (time.perf_counter() - started) / n * 1e6

    return {"service_status_us": status_us, "thread_hop_us": anyio.run(hops)}


# --- summary ---------------------------------------------------------------------------------------


def summarize(args: argparse.Namespace, measured: dict[str, Any]) -> dict[str, Any]:
    """Medians over rounds. Cost ratio = noop calls/s / status calls/s (time per call, status/noop)."""
    rounds = measured["rounds"]
    med = statistics.median
    out: dict[str, Any] = {}
    for phase in ("sequential", "concurrent"):
        per = [r[phase] for r in rounds]
        status = [p[STATUS]["rate"] for p in per]
        noop = [p[NOOP]["rate"] for p in per]
        ratios = [n / s for n, s in zip(noop, status, strict=True)]
        cpu_ratios = [p[STATUS]["server_cpu_ms"] / p[NOOP]["server_cpu_ms"] for p in per]
        out[phase] = {
            "status_calls_s": round(med(status)),
            "noop_calls_s": round(med(noop)),
            "ratio": round(med(ratios), 3),
            "ratios": [round(x, 2) for x in ratios],
            "status_calls_s_all": [round(x) for x in status],
            "noop_calls_s_all": [round(x) for x in noop],
            "server_cpu_ms_status": round(med(p[STATUS]["server_cpu_ms"] for p in per), 3),
            "server_cpu_ms_noop": round(med(p[NOOP]["server_cpu_ms"] for p in per), 3),
            "server_cpu_ratio": round(med(cpu_ratios), 3),
            "client_cpu_ms_status": round(med(p[STATUS]["client_cpu_ms"] for p in per), 3),
            "client_cpu_ms_noop": round(med(p[NOOP]["client_cpu_ms"] for p in per), 3),
            "server_ms_status": round(med(p[STATUS]["server_ms"] for p in per), 3),
            "server_ms_noop": round(med(p[NOOP]["server_ms"] for p in per), 3),
        }
        if STATUS + LEGACY in per[0]:
            old_status = [p[STATUS + LEGACY]["rate"] for p in per]
            old_noop = [p[NOOP + LEGACY]["rate"] for p in per]
            era_ratios = [new / old for new, old in zip(status, old_status, strict=True)]
            out[phase]["legacy"] = {
                "status_calls_s": round(med(old_status)),
                "noop_calls_s": round(med(old_noop)),
                "ratio": round(med(n / s for n, s in zip(old_noop, old_status, strict=True)), 3),
                # the target: 2025-era status time per call / 2026-07-28 status time per call
                "vs_modern_status": round(med(era_ratios), 3),
                "vs_modern_status_all": [round(x, 2) for x in era_ratios],
                "server_cpu_ms_status": round(med(p[STATUS + LEGACY]["server_cpu_ms"] for p in per), 3),
                "server_ms_status": round(med(p[STATUS + LEGACY]["server_ms"] for p in per), 3),
            }
    adds = [r["add_records"] for r in rounds]
    out["add_records"] = {
        "batch": args.batch,
        "calls_s": round(med(a["calls_s"] for a in adds), 2),
        "records_s": round(med(a["records_s"] for a in adds)),
        "records_s_all": [round(a["records_s"]) for a in adds],
        "server_ms": round(med(a["server_ms"] for a in adds), 2),
        "server_cpu_ms": round(med(a["server_cpu_ms"] for a in adds), 2),
    }
    return out


def print_summary(s: dict[str, Any], args: argparse.Namespace) -> None:
    print()
    print("medians over rounds; ratio = status time per call / noop time per call")
    print(
        f"{'phase':<11} {'status/s':>8} {'noop/s':>7} {'ratio':>6} {'per-round ratios':<26} "
        f"{'server CPU ms/call s/n':>23} {'cpu ratio':>9} {'client CPU ms s/n':>18} {'server ms s/n':>14}"
    )
    for phase, label in (("sequential", "sequential"), ("concurrent", f"{args.concurrency}-way")):
        p = s[phase]
        print(
            f"{label:<11} {p['status_calls_s']:>8} {p['noop_calls_s']:>7} {p['ratio']:>5.2f}x "
            f"{', '.join(f'{x:.2f}' for x in p['ratios']):<26} "
            f"{p['server_cpu_ms_status']:>11.2f} / {p['server_cpu_ms_noop']:<9.2f} "
            f"{p['server_cpu_ratio']:>8.2f}x "
            f"{p['client_cpu_ms_status']:>8.2f} / {p['client_cpu_ms_noop']:<7.2f} "
            f"{p['server_ms_status']:>6.2f} / {p['server_ms_noop']:.2f}"
        )
    for phase, label in (("sequential", "sequential"), ("concurrent", f"{args.concurrency}-way")):
        old = s[phase].get("legacy")
        if old:
            print(
                f"{label:<11} 2025-11-25 session: status {old['status_calls_s']}/s, noop "
                f"{old['noop_calls_s']}/s ({old['ratio']:.2f}x); status vs the 2026-07-28 status: "
                f"{old['vs_modern_status']:.2f}x "
                f"({', '.join(f'{x:.2f}' for x in old['vs_modern_status_all'])}); "
                f"server CPU {old['server_cpu_ms_status']:.2f} ms/call"
            )
    a = s["add_records"]
    print(
        f"add_records ({a['batch']}-record batches): {a['calls_s']} calls/s, {a['records_s']} records/s "
        f"(rounds: {a['records_s_all']}), server median {a['server_ms']} ms/call, "
        f"server CPU {a['server_cpu_ms']} ms/call"
    )
    d = s.get("direct")
    if d:
        print(
            f"in this process: ImportService.status {d['service_status_us']:.0f} us/call, "
            f"anyio thread hop {d['thread_hop_us']:.0f} us"
        )
    worst = max(s["sequential"]["ratio"], s["concurrent"]["ratio"])
    print(
        f"target status <= 1.3x noop: {'met' if worst <= 1.3 else 'MISSED'} (worst median ratio {worst:.2f}x)"
    )
    eras = [s[p]["legacy"]["vs_modern_status"] for p in ("sequential", "concurrent") if "legacy" in s[p]]
    if eras:
        print(
            "target 2025-era status <= 1.3x the 2026-07-28 status: "
            f"{'met' if max(eras) <= 1.3 else 'MISSED'} (worst median ratio {max(eras):.2f}x)"
        )


def print_profiles(paths: dict[str, str]) -> None:
    for tool, path in paths.items():
        print(f"\n--- server profile, {tool} (event-loop thread, tottime) ---", file=sys.stderr)
        stats = pstats.Stats(path, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(20)
        stats.sort_stats("cumulative").print_stats(30)


# --- main ------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
    p.add_argument("--calls", type=int, default=400, help="sequential calls per tool per round")
    p.add_argument(
        "--chunk",
        type=int,
        default=40,
        help="calls per tool before switching to the other one (split over the clients when concurrent)",
    )
    p.add_argument("--concurrency", type=int, default=8, help="concurrent clients (default 8)")
    p.add_argument("--calls-concurrent", type=int, default=50, help="calls per client per tool per round")
    p.add_argument("--batch", type=int, default=500, help="records per add_records call")
    p.add_argument("--batches", type=int, default=20, help="add_records calls per round")
    p.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    p.add_argument("--legacy", choices=("embedded", "tcp"), default="embedded")
    p.add_argument("--auth", choices=("local", "tokens"), default="local")
    p.add_argument(
        "--eras",
        choices=("both", "modern"),
        default="both",
        help="also measure over 2025-11-25 sessions (default) or only 2026-07-28",
    )
    p.add_argument(
        "--profile-server", metavar="PATH", help="also profile the server (PATH.status, PATH.noop)"
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(json.loads(args.child))
    with tempfile.TemporaryDirectory(prefix="bench-mcp-calls-") as tmp, contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        db_url = stack.enter_context(DatabaseFactory(args.db, workdir, args.postgres_url).fresh())
        if args.legacy == "tcp":
            host, port = stack.enter_context(simulator(workdir))
            legacy_url = f"tcp://{host}:{port}"
        else:
            legacy_url = "embedded"
        token = TOKEN if args.auth == "tokens" else None
        tokens_path = None
        if token:
            tokens_path = workdir / "tokens.json"
            tokens_path.write_text(json.dumps({token: {"principal": "bench", "tenant": "bench"}}))
        settings = {
            "database_url": db_url,
            "legacy_url": legacy_url,
            "legacy_db": str(workdir / "legacy-embedded.db"),
            "secret": secrets.token_hex(32),
            "secret_file": str(workdir / "unused.secret"),
            "tokens": str(tokens_path) if tokens_path else None,
            "max_records_per_call": max(args.batch, 1000),
        }
        config = {"settings": settings}
        if args.profile_server:
            config["profile_names"] = [
                f"{args.profile_server}.{name}" for name in ("status", "noop", "status2025")
            ]
        log_path = workdir / "server.log"
        url, proc = stack.enter_context(server_process(config, log_path))
        print(
            f"server: {url} (child pid {proc.pid}), db={args.db}, legacy={args.legacy}, auth={args.auth}",
            flush=True,
        )
        measured = asyncio.run(measure(args, url, token, ServerLog(log_path), proc))
        summary = summarize(args, measured)
        principal = Principal(subject="bench", tenant="bench") if token else _local_principal()
        summary["direct"] = {
            k: round(v, 1) for k, v in direct_costs(settings, measured["handle"], principal).items()
        }
    print_summary(summary, args)
    if measured["profiles"]:
        print_profiles(measured["profiles"])
    summary.update(
        db=args.db,
        legacy=args.legacy,
        auth=args.auth,
        rounds=args.rounds,
        calls=args.calls,
        concurrency=args.concurrency,
        calls_concurrent=args.calls_concurrent,
        eras=args.eras,
        server="subprocess",
        nproc=os.cpu_count(),
        python=platform.python_version(),
        date=time.strftime("%Y-%m-%d"),
    )
    print(json.dumps(summary, sort_keys=True))
    return 0


def _local_principal() -> Principal:
    from adapter.entrypoints.mcp.identity import current_principal

    return current_principal(auth_required=False)


if __name__ == "__main__":
    sys.exit(main())
