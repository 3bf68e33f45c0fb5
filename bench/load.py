"""Load benchmark: N concurrent clients importing for a fixed time, the kit (one and two workers,
PostgreSQL) against the naive wrapper (``bench/naive_server.py``).

Each client loops: ``begin_import`` / ``add_records`` x ``--adds`` (``--batch`` records each) /
``commit_import``, from the start for ``--warmup`` + ``--seconds``. Only the last ``--seconds`` count
(steady state: every client is mid-loop when the window opens): an import counts when its commit
answered ``committed`` inside the window, a latency when its call started and ended inside it.
Reported per configuration: imports/s, records/s, p50/p99 latency per tool, and errors (any
JSON-RPC error, ``isError`` result, HTTP failure or commit not ``committed``; must be 0).

What runs where: the simulator as a child process over TCP (shared by every configuration); each
server as child processes (``python -m adapter serve [--workers 2]`` on a fresh PostgreSQL schema,
local mode, ``ADAPTER_CONFIRM_COMMIT=never``; the naive server); the clients in this process, one
``httpx.AsyncClient`` each, plain JSON-RPC posts with the 2026-07-28 headers (the same cheap client for
every server, so client CPU is charged alike). The configurations run one after the other, in the
order naive, kit x1, kit x2 (then reversed for ``--rounds 2``...), each after a short warm-up.

Targets (issue 13): kit x1 >= 0.7x the naive wrapper's imports/s at 32 clients; kit x2 >= 1.3x kit x1.

Usage::

    .venv/bin/python bench/load.py                          # 32 clients, 10 s per configuration
    .venv/bin/python bench/load.py --clients 32 --seconds 10 --rounds 2

Prints a table and one JSON line (the last line of stdout).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import DEFAULT_POSTGRES_URL, fresh_database, simulator, unmetered_env

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL_VERSION = "2026-07-28"
TOOLS = ("begin_import", "add_records", "commit_import")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running(command: list[str], env: dict[str, str], port: int, log: Path) -> Iterator[tuple[str, int]]:
    """A server child process; yields its /mcp URL and its process group once it accepts HTTP, and
    stops the group after."""
    process = subprocess.Popen(
        command,
        cwd=log.parent,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited: {log.read_text()[-1500:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {log.read_text()[-1500:]}") from None
                time.sleep(0.2)
        workers = int(command[command.index("--workers") + 1]) if "--workers" in command else 1
        if workers > 1:  # every worker must serve before the clients connect (keep-alive
            # connections stay with the worker that accepted them)
            while log.read_text().count(" ready") < workers:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"workers did not start: {log.read_text()[-1500:]}")
                time.sleep(0.2)
        yield base + "/mcp", process.pid  # its own session: the group id is its pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(timeout=10)


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in TOOLS})
    imports: int = 0
    errors: int = 0
    first_error: str | None = None
    cpu: dict[str, float] | None = None  # CPU seconds per role inside the window

    def error(self, what: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or what[:300]


async def call(http: httpx.AsyncClient, url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    response = await http.post(url, json=message, headers=headers)
    body: Any = None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                data = json.loads(line[5:].strip())
                if "id" in data:
                    body = data
    else:
        body = response.json() if response.content else None
    if not isinstance(body, dict) or "result" not in body:
        raise RuntimeError(f"{tool}: HTTP {response.status_code} {str(body)[:200]}")
    result = body["result"]
    if result.get("isError"):
        raise RuntimeError(f"{tool}: {result.get('content')}")
    structured = result.get("structuredContent")
    if not isinstance(structured, dict):
        raise RuntimeError(f"{tool}: no structured result")
    return structured.get("result", structured) if "handle" not in structured else structured


@dataclass(frozen=True)
class Window:
    """Clients run from the start to ``end``; only what completes inside [``opens``, ``end``] counts."""

    opens: float
    end: float

    def counts(self, started: float, finished: float) -> bool:
        return started >= self.opens and finished <= self.end


ROLES = ("server", "postgres", "simulator", "clients")


def cpu_by_role(server_group: int | None) -> dict[str, float] | None:
    """CPU seconds used so far by each role (Linux ``/proc``; None elsewhere): the server's
    process group, every PostgreSQL backend, the simulator and this process (the clients)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    tick = os.sysconf("SC_CLK_TCK")
    used = dict.fromkeys(ROLES, 0.0)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # the process ended while we looked
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        if int(entry.name) == os.getpid():
            used["clients"] += seconds
        elif server_group is not None and int(fields[2]) == server_group:
            used["server"] += seconds
        elif comm == "postgres":
            used["postgres"] += seconds
        elif b"legacy_sim" in command:
            used["simulator"] += seconds
    return used


async def client_loop(url: str, window: Window, args: argparse.Namespace, tally: Tally, n: int) -> None:
    records = [[{"client": n, "add": a, "i": i} for i in range(args.batch)] for a in range(args.adds)]

    async def timed(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        out = await call(http, url, tool, arguments)
        if window.counts(started, time.monotonic()):
            tally.latencies[tool].append(time.monotonic() - started)
        return out

    async with httpx.AsyncClient(timeout=120) as http:
        while time.monotonic() < window.end:
            try:
                handle = (await timed("begin_import", {"target": "customers"}))["handle"]
                for chunk in records:
                    await timed("add_records", {"handle": handle, "records": chunk})
                committed = await timed("commit_import", {"handle": handle})
                if committed.get("status") != "committed":
                    tally.error(f"commit answered {committed.get('status')}")
                elif window.opens <= time.monotonic() <= window.end:
                    tally.imports += 1  # an import counts when its commit completes inside the window
            except Exception as exc:  # counted, never hidden: errors must be 0
                tally.error(f"{type(exc).__name__}: {exc}")


async def drive(url: str, args: argparse.Namespace, server_group: int | None = None) -> Tally:
    """Every client loops from now on; the first ``--warmup`` seconds fill the pipeline and do not count.

    The CPU each role used inside the window is sampled at its two ends (``Tally.cpu``)."""
    tally = Tally()
    now = time.monotonic()
    window = Window(opens=now + args.warmup, end=now + args.warmup + args.seconds)

    async def sample_cpu() -> None:
        await asyncio.sleep(window.opens - time.monotonic())
        first = cpu_by_role(server_group)
        await asyncio.sleep(window.end - time.monotonic())
        last = cpu_by_role(server_group)
        if first is not None and last is not None:
            tally.cpu = {role: last[role] - first[role] for role in ROLES}

    await asyncio.gather(
        sample_cpu(), *(client_loop(url, window, args, tally, n) for n in range(args.clients))
    )
    return tally


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def figures(tally: Tally, seconds: float, args: argparse.Namespace) -> dict[str, Any]:
    cpu = tally.cpu or {}
    return {
        "cores": {role: round(used / seconds, 3) for role, used in cpu.items()},
        "cpu_ms_per_import": {
            role: round(1000 * used / tally.imports, 2) if tally.imports else None
            for role, used in cpu.items()
        },
        "imports_per_s": tally.imports / seconds,
        "records_per_s": tally.imports * args.adds * args.batch / seconds,
        "imports": tally.imports,
        "errors": tally.errors,
        "first_error": tally.first_error,
        "latency_ms": {
            tool: {
                "p50": 1000 * statistics.median(v) if v else float("nan"),
                "p99": 1000 * percentile(v, 0.99),
                "calls": len(v),
            }
            for tool, v in tally.latencies.items()
        },
    }


def measure(name: str, url: str, args: argparse.Namespace, server_group: int | None = None) -> dict[str, Any]:
    tally = asyncio.run(drive(url, args, server_group))
    result = figures(tally, args.seconds, args)
    print(f"  {name}: {result['imports_per_s']:.1f} imports/s, errors {result['errors']}", file=sys.stderr)
    return result


def kit_env(database_url: str, legacy: str, clients: int, workers: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}
    env.update(
        ADAPTER_DATABASE_URL=database_url,
        ADAPTER_LEGACY_URL=legacy,
        ADAPTER_SECRET=secrets.token_hex(32),
        ADAPTER_CONFIRM_COMMIT="never",
        ADAPTER_MAX_COMMITS_PER_TENANT="1000",  # one tenant, many clients: the load, not the quota
        ADAPTER_MAX_OPEN_IMPORTS_PER_PRINCIPAL="100000",
        # Every client may be committing at once; the naive wrapper has no such bound either.
        ADAPTER_LEGACY_SESSIONS=str(max(16, clients)),
        # A worker's share of the clients plus the heartbeats and background loops, within
        # PostgreSQL's 100 connections for both workers together (docs/deployment.md, sizing).
        ADAPTER_DB_POOL_SIZE=str(clients // workers + 8),
        ADAPTER_DB_MAX_OVERFLOW="8",
        **unmetered_env(),  # one principal, many clients: the load, not the rates
    )
    return env


def run_config(name: str, workdir: Path, legacy: str, args: argparse.Namespace) -> dict[str, Any]:
    port = _free_port()
    log = workdir / f"{name}-{port}.log"
    if name == "naive":
        command = [
            sys.executable,
            str(ROOT / "bench" / "naive_server.py"),
            "--port",
            str(port),
            "--legacy",
            legacy,
        ]
        with running(command, dict(os.environ), port, log) as (url, group):
            return measure(name, url, args, group)
    workers = 2 if name == "kit_x2" else 1
    with fresh_database("postgres", workdir, args.postgres_url) as database_url:
        command = [sys.executable, "-m", "adapter", "serve", "--port", str(port), "--workers", str(workers)]
        with running(command, kit_env(database_url, legacy, args.clients, workers), port, log) as (
            url,
            group,
        ):
            return measure(name, url, args, group)


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Rounds of one configuration: imports/s and CPU averaged, errors summed, latencies from the first."""
    merged = dict(results[0])
    for key in ("cores", "cpu_ms_per_import"):
        values = [r[key] for r in results if r[key] and None not in r[key].values()]
        merged[key] = (
            {role: round(statistics.mean(v[role] for v in values), 3) for role in ROLES} if values else {}
        )
    merged["imports_per_s"] = statistics.mean(r["imports_per_s"] for r in results)
    merged["records_per_s"] = statistics.mean(r["records_per_s"] for r in results)
    merged["errors"] = sum(r["errors"] for r in results)
    merged["rounds"] = [round(r["imports_per_s"], 2) for r in results]
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time per configuration")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before the window opens")
    parser.add_argument("--adds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1, help="order reversed every other round")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument(
        "--only", choices=("naive", "kit_x1", "kit_x2"), action="append", help="run only these (profiling)"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.seconds <= 300 or not 1 <= args.clients <= 256 or not 1 <= args.rounds <= 5:
        parser.error("--seconds 1..300, --clients 1..256, --rounds 1..5")
    order = args.only or ["naive", "kit_x1", "kit_x2"]
    load_before = os.getloadavg()
    collected: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        workdir = Path(tmp)
        with simulator(workdir) as (host, port):
            legacy = f"tcp://{host}:{port}"
            for r in range(args.rounds):
                for name in order if r % 2 == 0 else list(reversed(order)):
                    collected[name].append(run_config(name, workdir, legacy, args))
    results = {name: merge(runs) for name, runs in collected.items()}
    naive, x1, x2 = (
        results[n]["imports_per_s"] if n in results else None for n in ("naive", "kit_x1", "kit_x2")
    )
    summary = {
        "bench": "load",
        "clients": args.clients,
        "seconds": args.seconds,
        "adds": args.adds,
        "batch": args.batch,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "results": results,
        "kit_x1_vs_naive": x1 / naive if x1 and naive else None,
        "kit_x2_vs_kit_x1": x2 / x1 if x2 and x1 else None,
        "errors": sum(r["errors"] for r in results.values()),
    }
    print_table(summary)
    print(json.dumps(summary, default=lambda v: None))
    return 0 if summary["errors"] == 0 else 1


def print_table(s: dict[str, Any]) -> None:
    print(
        f"load: {s['clients']} clients, {s['seconds']:.0f} s per configuration x {s['rounds']} round(s), "
        f"begin / add_records {s['adds']} x {s['batch']} / commit; load average before {s['loadavg_before']}"
    )
    header = f"{'configuration':<14}{'imports/s':>10}{'records/s':>11}{'errors':>7}"
    for tool in TOOLS:
        header += f"{tool + ' p50/p99 ms':>30}"
    print(header)
    for name, r in s["results"].items():
        row = f"{name:<14}{r['imports_per_s']:>10.1f}{r['records_per_s']:>11.0f}{r['errors']:>7}"
        for tool in TOOLS:
            lat = r["latency_ms"][tool]
            row += f"{lat['p50']:>20.1f} / {lat['p99']:>7.1f}"
        print(row)
        if r["first_error"]:
            print(f"  first error: {r['first_error']}")
        if r["cores"]:
            per_import = r["cpu_ms_per_import"]
            print(
                "  CPU in the window, cores (ms per import): "
                + ", ".join(f"{role} {r['cores'][role]:.2f} ({per_import[role]})" for role in r["cores"])
                + f"; all {sum(r['cores'].values()):.2f} of {s['cpus']}"
            )
    x1, x2 = (f"{v:.2f}x" if v is not None else "n/a" for v in (s["kit_x1_vs_naive"], s["kit_x2_vs_kit_x1"]))
    print(f"kit x1 / naive: {x1} (target >= 0.7x); kit x2 / kit x1: {x2} (target >= 1.3x)")


if __name__ == "__main__":
    raise SystemExit(main())
