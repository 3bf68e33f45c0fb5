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
  ``--auth jwt-vs-tokens`` is a run of its own (issue 23): two server children on one database, one
  with the token file, one in resource-server mode checking a JWT (RS256, the key set from an
  issuer this script serves on loopback: its metadata and JWKS, fetched once), the same principal
  in both; ``get_import_status`` of the same import on each, interleaved ABBA, sequential and
  concurrent. Target: the JWT's time per call at most 1.1x the token file's. ``--uncached`` turns
  the server's cache of checked tokens off, so every call checks its JWT from scratch.
* Record validation: the simulator declares only the permissive ``*`` target (any JSON object is a
  record), so the child wraps its port in :class:`TypedTargets`, which declares the target ``items``
  whose records must match :class:`BenchItem` (six typed, required fields, an enum, bounds, no other
  field): ``add_records`` runs with per-record schema validation on, as a deployment with declared
  targets does.
  ``--schema none`` measures the permissive wildcard instead (no per-record check).

What it measures, interleaved round by round (order flipped every round: ABBA...) so drift in
machine load hits both tools alike:

1. sequential: one client, ``--calls`` calls of each tool per round;
2. concurrent: ``--concurrency`` clients (own HTTP connection each), ``--calls-concurrent`` calls
   each per tool per round;
3. ``add_records``: a fresh import per round, ``--batches`` calls of ``--batch`` records each.

``--only add_records`` skips the two status phases (and the 2025-era clients). ``--profile-add PATH``
adds one untimed ``add_records`` round under cProfile in the server: the event-loop thread
(``PATH.loop``: HTTP, the SDK's JSON-RPC parsing, argument validation, the result) and the worker
thread where the service runs (``PATH.worker``: our validation, encoding, fingerprint, quotas, the
insert), printed on stderr.

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
    .venv/bin/python bench/mcp_calls.py --only add_records --rounds 5         # add_records only
    .venv/bin/python bench/mcp_calls.py --only add_records --profile-add /tmp/add.prof
    .venv/bin/python bench/mcp_calls.py --auth jwt-vs-tokens --rounds 4      # JWT vs the token file

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
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from adapter.bootstrap import build, build_legacy_port
from adapter.config import load_settings
from adapter.domain.identity import Principal
from adapter.legacy.forwarding import ForwardingPort
from adapter.ports.legacy import WILDCARD_TARGET, LegacyPort, Target
from legacy_sim.process import stop_process

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_import import DEFAULT_POSTGRES_URL, DatabaseFactory, make_records, simulator
from harness import UNMETERED

REPO = Path(__file__).resolve().parents[1]
TOKEN = "bench-token-" + secrets.token_hex(16)
STATUS, NOOP, NOOP_ADD = "get_import_status", "noop", "noop_add"
TIMEOUT = 60.0


# --- the server child ------------------------------------------------------------------------------

ITEMS = "items"


class BenchItem(BaseModel):
    """One stock item, as ``core_import.make_records`` builds them: the schema ``add_records`` checks."""

    model_config = ConfigDict(extra="forbid")
    sku: str = Field(pattern=r"^SKU-[0-9]{8}$")
    name: str = Field(min_length=1, max_length=200)
    qty: int = Field(ge=0)
    unit_price: float = Field(ge=0)
    warehouse: Literal["north", "south", "east", "west"]
    active: bool


class TypedTargets(ForwardingPort):
    """The simulator with declared targets: ``items`` (records must be :class:`BenchItem`) and the
    permissive ``*`` for the status phases' set-up import. ``schema=False``: ``items`` accepts any object."""

    def __init__(self, inner: LegacyPort, *, schema: bool) -> None:
        super().__init__(inner)
        items = Target.from_model(ITEMS, BenchItem) if schema else Target(ITEMS, "Any object.")
        self._targets = (items, Target(WILDCARD_TARGET, "Anything else."))

    def targets(self) -> Sequence[Target]:
        return self._targets

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if callable(close):
            close()


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


async def _noop_add(call: Any, args: Any) -> Any:
    from adapter.entrypoints.mcp import schemas

    return schemas.AddRecordsOut(
        handle=args.handle, accepted=len(args.records), record_count=0, replayed=False
    )


def noop_add_tool() -> Any:
    """``add_records``' own input and output models, nothing done: what the SDK and HTTP cost alone."""
    from adapter.entrypoints.mcp import schemas
    from adapter.entrypoints.mcp.tools import Tool

    hints = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
    return Tool(
        NOOP_ADD,
        "No-op add",
        "Benchmark only.",
        schemas.AddRecordsIn,
        schemas.AddRecordsOut,
        hints,
        _noop_add,
    )


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
    kit = build(settings, legacy=TypedTargets(build_legacy_port(settings), schema=config["schema"]))
    app = create_app(kit)
    if config.get("uncached") and app.state.resource_server is not None:
        app.state.resource_server.checked = None  # every call checks its JWT from scratch
    app.state.gateway.tools[NOOP] = noop_tool()
    app.state.gateway.tools[NOOP_ADD] = noop_add_tool()
    worker = WorkerProfiler(kit.service)

    profiles = iter(config.get("profile_names") or [])
    profiler: list[cProfile.Profile] = []

    def start_profile() -> None:
        profiler[:] = [cProfile.Profile()]
        profiler[0].enable()
        worker.start()

    def stop_profile() -> None:
        if profiler:
            profiler[0].disable()
            name = next(profiles)
            profiler.pop().dump_stats(name)
            worker.stop(name + ".worker")
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


class WorkerProfiler:
    """Profiles ``ImportService.add`` in the worker thread that runs it (cProfile sees one thread).

    A profiler object must be enabled by one thread at a time: with several clients, a call that
    overlaps a profiled one runs unprofiled."""

    def __init__(self, service: Any) -> None:
        self.profile: cProfile.Profile | None = None
        self.calls = 0
        self.busy = threading.Lock()
        original = service.add

        def add(*args: Any, **kwargs: Any) -> Any:
            profile = self.profile
            if profile is None or not self.busy.acquire(blocking=False):
                return original(*args, **kwargs)
            self.calls += 1
            profile.enable()
            try:
                return original(*args, **kwargs)
            finally:
                profile.disable()
                self.busy.release()

        service.add = add

    def start(self) -> None:
        self.profile, self.calls = cProfile.Profile(), 0

    def stop(self, path: str) -> None:
        profile, self.profile = self.profile, None
        if profile is not None and self.calls:
            profile.dump_stats(path)


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
    clients: Sequence[Client],
    log: ServerLog,
    pid: int,
    batches: list[list[dict[str, Any]]],
    tool: str = "add_records",
) -> dict[str, float]:
    """Each client stages into an import of its own, one call after another; the batches are dealt
    out to the clients in turn (one client: the sequential figure). ``tool=NOOP_ADD``: the same
    calls to the no-op that takes the same arguments."""

    Batches = list[list[dict[str, Any]]]

    def worker(client: Client, handle: str, mine: Batches) -> Callable[[], Awaitable[None]]:
        async def work() -> None:
            for chunk in mine:
                added = await call(client, tool, {"handle": handle, "records": chunk})
                assert added["accepted"] == len(chunk)

        return work

    workers = []
    for i, client in enumerate(clients):
        handle = (await call(client, "begin_import", {"target": ITEMS}))["handle"]
        workers.append(worker(client, handle, batches[i :: len(clients)]))
    figures = (await timed_block(log, pid, workers, len(batches), tool)).figures()
    per_call = sum(len(b) for b in batches) / len(batches)
    return {
        "calls_s": figures["rate"],
        "records_s": figures["rate"] * per_call,
        "server_ms": figures["server_ms"],
        "server_cpu_ms": figures["server_cpu_ms"],
        "client_cpu_ms": figures["client_cpu_ms"],
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
    status_phases = args.only != "add_records"
    async with contextlib.AsyncExitStack() as stack:
        n_clients = max(args.concurrency if status_phases else 1, args.add_clients)
        clients = [await stack.enter_async_context(mcp_client(url, token)) for _ in range(n_clients)]
        old = [
            await stack.enter_async_context(mcp_client(url, token, mode="legacy"))
            for _ in range(args.concurrency if args.eras == "both" and status_phases else 0)
        ]
        seq_client = clients[0]
        adders = clients[: args.add_clients]
        handle = await committed_handle(seq_client)
        every = {"": clients, LEGACY: old} if old else {"": clients}
        first = {era: group[:1] for era, group in every.items()}
        # warm-up: every client, both tools (tools/list for output schemas, connections, caches)
        if status_phases:
            await compare(every, log, pid, handle, 20, 20)
        await add_round(adders, log, pid, batches[: 2 * len(adders)])

        rounds: list[dict[str, Any]] = []
        for r in range(args.rounds):
            line = f"  round {r + 1}: "
            seq = conc = None
            if status_phases:
                seq = await compare(first, log, pid, handle, args.calls, args.chunk)
                conc = await compare(
                    every, log, pid, handle, args.calls_concurrent, max(1, args.chunk // args.concurrency)
                )
                line += f"{ratio_line('seq', seq)} | {ratio_line(f'{args.concurrency}-way', conc)} | "
            if r % 2:  # ABBA: the no-op taking the same records, before or after
                noop_add = await add_round(adders, log, pid, batches, NOOP_ADD)
                add = await add_round(adders, log, pid, batches)
            else:
                add = await add_round(adders, log, pid, batches)
                noop_add = await add_round(adders, log, pid, batches, NOOP_ADD)
            add["vs_noop"] = noop_add["calls_s"] / add["calls_s"]
            add["noop_records_s"] = noop_add["records_s"]
            add["noop_server_cpu_ms"] = noop_add["server_cpu_ms"]
            rounds.append({"sequential": seq, "concurrent": conc, "add_records": add})
            print(
                line + f"add_records {add['calls_s']:4.1f} calls/s {add['records_s']:6.0f} rec/s "
                f"(CPU ms/call: server {add['server_cpu_ms']:.1f}, client {add['client_cpu_ms']:.1f})",
                flush=True,
            )

        profiles = None
        if args.profile_add:
            proc.send_signal(signal.SIGUSR1)
            await anyio.sleep(0.2)
            await add_round(adders, log, pid, batches)
            proc.send_signal(signal.SIGUSR2)
            await anyio.sleep(0.5)
            profiles = {"add_records (event loop)": f"{args.profile_add}.loop"}
            if Path(f"{args.profile_add}.loop.worker").exists():
                profiles["add_records (worker thread)"] = f"{args.profile_add}.loop.worker"
        if args.profile_server and status_phases:
            profiles = profiles or {}
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
    for phase in ("sequential", "concurrent") if rounds[0]["sequential"] else ():
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
        "clients": args.add_clients,
        "schema": schema_name(args),
        "calls_s": round(med(a["calls_s"] for a in adds), 2),
        "records_s": round(med(a["records_s"] for a in adds)),
        "records_s_all": [round(a["records_s"]) for a in adds],
        "server_ms": round(med(a["server_ms"] for a in adds), 2),
        "server_cpu_ms": round(med(a["server_cpu_ms"] for a in adds), 2),
        "client_cpu_ms": round(med(a["client_cpu_ms"] for a in adds), 2),
        "noop_records_s": round(med(a["noop_records_s"] for a in adds)),
        "noop_server_cpu_ms": round(med(a["noop_server_cpu_ms"] for a in adds), 2),
        "vs_noop": round(med(a["vs_noop"] for a in adds), 3),
        "vs_noop_all": [round(a["vs_noop"], 2) for a in adds],
    }
    return out


def schema_name(args: argparse.Namespace) -> str:
    if args.schema == "typed":
        return f"target '{ITEMS}': BenchItem (6 typed required fields, pattern, enum, bounds, no extras)"
    return f"target '{ITEMS}': any JSON object (no per-record check)"


def print_summary(s: dict[str, Any], args: argparse.Namespace) -> None:
    print()
    a = s["add_records"]
    print(
        f"add_records ({a['batch']}-record batches, {a['clients']} client(s), validated against "
        f"{a['schema']}): {a['calls_s']} "
        f"calls/s, {a['records_s']} records/s (rounds: {a['records_s_all']}), server median "
        f"{a['server_ms']} ms/call, server CPU {a['server_cpu_ms']} ms/call "
        f"({a['server_cpu_ms'] * 1000 / a['batch']:.1f} us/record), client CPU {a['client_cpu_ms']} ms/call"
    )
    print(
        f"  the SDK no-op taking the same records ({NOOP_ADD}): {a['noop_records_s']} records/s, server CPU "
        f"{a['noop_server_cpu_ms']} ms/call; add_records costs {a['vs_noop']:.2f}x it per call "
        f"(rounds: {a['vs_noop_all']})"
    )
    if "sequential" not in s:
        return
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
        print(f"\n--- server profile, {tool} (tottime, then cumulative) ---", file=sys.stderr)
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
    p.add_argument(
        "--add-clients",
        type=int,
        default=1,
        help="clients staging at once, each into its own import (default 1: one call after another)",
    )
    p.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    p.add_argument("--legacy", choices=("embedded", "tcp"), default="embedded")
    p.add_argument("--auth", choices=("local", "tokens", "jwt-vs-tokens"), default="local")
    p.add_argument(
        "--eras",
        choices=("both", "modern"),
        default="both",
        help="also measure over 2025-11-25 sessions (default) or only 2026-07-28",
    )
    p.add_argument(
        "--profile-server",
        metavar="PATH",
        help="also profile the server (PATH.status, PATH.noop, PATH.status2025)",
    )
    p.add_argument(
        "--only", choices=("all", "add_records"), default="all", help="add_records: skip the status phases"
    )
    p.add_argument(
        "--schema",
        choices=("typed", "none"),
        default="typed",
        help="add_records into a target with a typed JSON Schema (default) or the permissive one",
    )
    p.add_argument(
        "--profile-add",
        metavar="PATH",
        help="profile one extra add_records round in the server (PATH.loop, PATH.loop.worker)",
    )
    p.add_argument(
        "--uncached",
        action="store_true",
        help="with --auth jwt-vs-tokens: the JWT server checks every token anew (no checked-token cache)",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(json.loads(args.child))
    if args.auth == "jwt-vs-tokens":
        return auth_main(args)
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
            **UNMETERED,
        }
        config: dict[str, Any] = {"settings": settings, "schema": args.schema == "typed", "profile_names": []}
        if args.profile_add:
            config["profile_names"].append(f"{args.profile_add}.loop")
        if args.profile_server:
            config["profile_names"] += [
                f"{args.profile_server}.{name}" for name in ("status", "noop", "status2025")
            ]
        log_path = workdir / "server.log"
        url, proc = stack.enter_context(server_process(config, log_path))
        print(
            f"server: {url} (child pid {proc.pid}), db={args.db}, legacy={args.legacy}, auth={args.auth}",
            flush=True,
        )
        load_before = os.getloadavg()[0]
        measured = asyncio.run(measure(args, url, token, ServerLog(log_path), proc))
        load_after = os.getloadavg()[0]
        summary = summarize(args, measured)
        principal = Principal(subject="bench", tenant="bench") if token else _local_principal()
        if args.only != "add_records":
            summary["direct"] = {
                k: round(v, 1) for k, v in direct_costs(settings, measured["handle"], principal).items()
            }
    summary["load_avg_1m"] = [round(load_before, 2), round(load_after, 2)]
    print_summary(summary, args)
    print(f"machine load (1-minute average) before / after: {load_before:.2f} / {load_after:.2f}")
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


# --- JWT validation vs the token file (--auth jwt-vs-tokens) --------------------------------------

BENCH_AUDIENCE = "http://127.0.0.1:9/mcp"  # an identifier: the tokens name it, the server checks it


class StaticIssuer:
    """An OAuth issuer on loopback that publishes its metadata and one RS256 key, and signs tokens.

    The server under test fetches the key set once and then checks every token locally; the fetch
    count it reports proves there is no network call per request."""

    def __init__(self) -> None:
        import http.server

        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa
        from jwt.algorithms import RSAAlgorithm

        self._jwt = jwt
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = {**json.loads(RSAAlgorithm.to_jwk(self.key.public_key())), "kid": "bench", "alg": "RS256"}
        self.fetches = {"jwks": 0}
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                documents = {
                    "/.well-known/openid-configuration": {
                        "issuer": issuer.url,
                        "jwks_uri": issuer.url + "/jwks",
                    },
                    "/jwks": {"keys": [jwk]},
                }
                body = json.dumps(documents.get(self.path, {})).encode()
                if self.path == "/jwks":
                    issuer.fetches["jwks"] += 1
                self.send_response(200 if self.path in documents else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, subject: str, tenant: str) -> str:
        now = int(time.time())
        claims = {
            "iss": self.url,
            "aud": BENCH_AUDIENCE,
            "sub": subject,
            "tenant": tenant,
            "client_id": "bench",
            "scope": "imports:read imports:write imports:commit imports:abort",
            "iat": now,
            "exp": now + 3600,
        }
        return str(
            self._jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "bench", "typ": "at+jwt"})
        )

    def close(self) -> None:
        self.server.shutdown()


async def compare_auth(
    servers: dict[str, tuple[str, str, ServerLog, int]], args: argparse.Namespace
) -> list[dict[str, dict[str, float]]]:
    """Rounds of ``get_import_status`` on each server (name -> url, token, log, pid), ABBA."""
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            name: [
                await stack.enter_async_context(mcp_client(url, token))
                for _ in range(max(1, args.concurrency))
            ]
            for name, (url, token, _, _) in servers.items()
        }
        handle = await committed_handle(clients["tokens"][0])
        names = list(servers)

        async def phase(per_client: int, chunk: int, concurrent: bool) -> dict[str, dict[str, float]]:
            tallies = {name: Tally() for name in names}
            done = turn = 0
            while done < per_client:
                n = min(chunk, per_client - done)
                for name in names if turn % 2 == 0 else names[::-1]:
                    _, _, log, pid = servers[name]
                    group = clients[name] if concurrent else clients[name][:1]
                    workers = [loop_worker(c, STATUS, handle, n) for c in group]
                    tallies[name].add(await timed_block(log, pid, workers, n * len(group), STATUS))
                done += n
                turn += 1
            return {name: t.figures() for name, t in tallies.items()}

        await phase(20, 20, concurrent=True)  # warm-up: connections, tools/list, the key set
        rounds = []
        for r in range(args.rounds):
            seq = await phase(args.calls, args.chunk, concurrent=False)
            conc = await phase(args.calls_concurrent, max(1, args.chunk // args.concurrency), concurrent=True)
            rounds.append({"sequential": seq, "concurrent": conc})
            print(
                f"  round {r + 1}: "
                + " | ".join(
                    f"{label} tokens {p['tokens']['rate']:5.0f} jwt {p['jwt']['rate']:5.0f} calls/s "
                    f"({p['tokens']['rate'] / p['jwt']['rate']:.2f}x)"
                    for label, p in (("seq", seq), (f"{args.concurrency}-way", conc))
                ),
                flush=True,
            )
    return rounds


def jwt_check_us(issuer: StaticIssuer, n: int = 2000) -> float:
    """Microseconds per JWT check by the server's verifier itself, the cache of checked tokens aside:
    what each new token costs once (a client then sends it for its whole life)."""
    from adapter.entrypoints.oauth import ResourceServer

    settings = load_settings(tokens=None, oauth_issuer=issuer.url, oauth_audience=BENCH_AUDIENCE)
    server = ResourceServer(settings, audience=BENCH_AUDIENCE, published_tools=[])
    token = issuer.token("bench", "bench")

    async def run() -> float:
        await server.verifier.verify(token)  # the key set, fetched once
        started = time.perf_counter()
        for _ in range(n):
            server.rules.caller(await server.verifier.verify(token))
        elapsed = (time.perf_counter() - started) / n * 1e6
        async with server.running():
            pass
        return elapsed

    return asyncio.run(run())


def auth_main(args: argparse.Namespace) -> int:
    """``--auth jwt-vs-tokens``: the two servers, the rounds, the summary (see the module docstring)."""
    issuer = StaticIssuer()
    with tempfile.TemporaryDirectory(prefix="bench-auth-") as tmp, contextlib.ExitStack() as stack:
        stack.callback(issuer.close)
        workdir = Path(tmp)
        db_url = stack.enter_context(DatabaseFactory(args.db, workdir, args.postgres_url).fresh())
        tokens_path = workdir / "tokens.json"
        tokens_path.write_text(json.dumps({TOKEN: {"principal": "bench", "tenant": "bench"}}))
        common = {"database_url": db_url, "secret": secrets.token_hex(32), "secret_file": str(workdir / "s")}
        variants = {
            "tokens": ({"tokens": str(tokens_path)}, TOKEN),
            "jwt": (
                {"oauth_issuer": issuer.url, "oauth_audience": BENCH_AUDIENCE},
                issuer.token("bench", "bench"),
            ),
        }
        servers: dict[str, tuple[str, str, ServerLog, int]] = {}
        for name, (auth, token) in variants.items():
            settings = {**common, **auth, "legacy_db": str(workdir / f"legacy-{name}.db")}
            config: dict[str, Any] = {
                "settings": settings,
                "schema": False,
                "profile_names": [],
                "uncached": args.uncached,
            }
            log_path = workdir / f"server-{name}.log"
            url, proc = stack.enter_context(server_process(config, log_path))
            servers[name] = (url, token, ServerLog(log_path), proc.pid)
        print(
            f"servers: token file {servers['tokens'][0]}, JWT {servers['jwt'][0]} (issuer {issuer.url})",
            flush=True,
        )
        load_before = os.getloadavg()[0]
        rounds = asyncio.run(compare_auth(servers, args))
        load_after = os.getloadavg()[0]
        server_fetches = issuer.fetches["jwks"]  # before this process fetches the set for itself
        check_us = jwt_check_us(issuer)
    med = statistics.median
    summary: dict[str, Any] = {
        "auth": "jwt-vs-tokens",
        "db": args.db,
        "rounds": args.rounds,
        "checked_token_cache": not args.uncached,
    }
    for phase in ("sequential", "concurrent"):
        per = [r[phase] for r in rounds]
        ratios = [p["tokens"]["rate"] / p["jwt"]["rate"] for p in per]
        summary[phase] = {
            "tokens_calls_s": round(med(p["tokens"]["rate"] for p in per)),
            "jwt_calls_s": round(med(p["jwt"]["rate"] for p in per)),
            "ratio": round(med(ratios), 3),
            "ratios": [round(x, 2) for x in ratios],
            "server_cpu_ms_tokens": round(med(p["tokens"]["server_cpu_ms"] for p in per), 3),
            "server_cpu_ms_jwt": round(med(p["jwt"]["server_cpu_ms"] for p in per), 3),
        }
    summary["jwks_fetches"] = server_fetches
    summary["jwt_check_us"] = round(check_us, 1)
    summary["load_avg_1m"] = [round(load_before, 2), round(load_after, 2)]
    print("\nmedians over rounds; ratio = JWT time per call / token-file time per call")
    for phase in ("sequential", "concurrent"):
        p = summary[phase]
        print(
            f"{phase:<11} tokens {p['tokens_calls_s']:>5}/s  jwt {p['jwt_calls_s']:>5}/s  "
            f"ratio {p['ratio']:.2f}x "
            f"({', '.join(f'{x:.2f}' for x in p['ratios'])}); server CPU ms/call "
            f"{p['server_cpu_ms_tokens']:.3f} vs {p['server_cpu_ms_jwt']:.3f}"
        )
    worst = max(summary["sequential"]["ratio"], summary["concurrent"]["ratio"])
    print(f"the JWT server fetched the JWKS {summary['jwks_fetches']} time(s) in the whole run")
    print(
        f"one JWT checked from scratch (signature, claims; not the checked-token cache), in this process: "
        f"{summary['jwt_check_us']} us"
    )
    print(
        f"target JWT <= 1.1x the token file: {'met' if worst <= 1.1 else 'MISSED'} "
        f"(worst median {worst:.2f}x)"
    )
    print(f"machine load (1-minute average) before / after: {load_before:.2f} / {load_after:.2f}")
    summary.update(nproc=os.cpu_count(), python=platform.python_version(), date=time.strftime("%Y-%m-%d"))
    print(json.dumps(summary, sort_keys=True))
    return 0


def _local_principal() -> Principal:
    from adapter.entrypoints.mcp.identity import current_principal

    return current_principal(auth_required=False)


if __name__ == "__main__":
    sys.exit(main())
