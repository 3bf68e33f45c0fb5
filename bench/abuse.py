"""Abuse cases against a running server, and what they cost another tenant (issue 10).

Everything binds 127.0.0.1 and the whole run is bounded by ``--deadline`` seconds. The server runs
as ``python -m adapter serve`` in a child process (token mode, the simulator over TCP as another
child with ``--latency-ms`` per command), on a fresh SQLite file or PostgreSQL schema. Two
principals in two tenants: alice@acme does the abuse, bob@globex is the bystander whose latency is
measured.

The cases (each prints the limit that held and bob's p99 ``begin_import`` latency while it ran):

1. ``bodies``: unauthenticated 200 MB bodies: chunked to an ``/admin`` action, declared by
   Content-Length to ``/admin``, chunked to ``/mcp``. The server's peak RSS (``VmHWM``) before and
   after says whether a body was read.
2. ``listens``: alice opens ``--listens`` ``subscriptions/listen`` streams at once; how many were
   accepted, and whether bob can still listen.
3. ``commits``: alice stages ``--commits`` imports (not measured), then commits them all at once
   against the slow simulator; how many ran and how many were refused (``quota_exceeded``).
4. ``abort``: alice stages ``--abort-mb`` MB of records in one import (not measured) and aborts it.

Bob's unloaded p99 is measured first; the target is that every loaded p99 stays within 3x of it.

Usage::

    .venv/bin/python bench/abuse.py                    # SQLite, about two minutes
    .venv/bin/python bench/abuse.py --db postgres --abort-mb 330
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import fresh_database

from legacy_sim.process import running_simulator

ALICE = "alice-" + secrets.token_hex(16)
BOB = os.environ.get("ABUSE_BOB_TOKEN") or "bob-" + secrets.token_hex(16)  # the probe process inherits it
ADMIN = "admin-" + secrets.token_hex(16)
MB = 1024 * 1024
TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.contextmanager
def server(workdir: Path, db_url: str, legacy: tuple[str, int], args: argparse.Namespace) -> Iterator[Any]:
    tokens = workdir / "tokens.json"
    tokens.write_text(
        json.dumps(
            {ALICE: {"principal": "alice", "tenant": "acme"}, BOB: {"principal": "bob", "tenant": "globex"}}
        )
    )
    tokens.chmod(0o600)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_") and k != "PORT"}
    env.update(
        ADAPTER_DATABASE_URL=db_url,
        ADAPTER_LEGACY_URL=f"tcp://{legacy[0]}:{legacy[1]}",
        ADAPTER_SECRET=secrets.token_hex(32),
        ADAPTER_TOKENS=str(tokens),
        ADAPTER_ADMIN_TOKEN=ADMIN,
        ADAPTER_CONFIRM_COMMIT="never",
        ADAPTER_MAX_IMPORT_BYTES=str(max(args.abort_mb + 16, 256) * MB),
        ADAPTER_MAX_OPEN_IMPORTS_PER_PRINCIPAL="1000000",  # bob's probe opens many; not a case here
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "adapter", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=workdir,
        stderr=(workdir / "server.log").open("w"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start; see server.log")
            time.sleep(0.1)
        yield base, proc.pid
    finally:
        proc.terminate()
        proc.wait(15)


@contextlib.asynccontextmanager
async def mcp_client(base: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(TIMEOUT)
        ) as http,
        Client(
            streamable_http_client(base + "/mcp", http_client=http), cache=None, read_timeout_seconds=TIMEOUT
        ) as client,
    ):
        yield client


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    if result.is_error:
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        raise RuntimeError(text)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def bystander(base: str, calls: int) -> list[float]:
    """Bob's begin_import latencies, one after the other."""
    times = []
    async with mcp_client(base, BOB) as bob:
        for _ in range(5):  # the connection and the first calls warm up; not timed
            await call(bob, "begin_import", {"target": "bystander", "ttl_seconds": 60})
        for _ in range(calls):
            started = time.perf_counter()
            await call(bob, "begin_import", {"target": "bystander", "ttl_seconds": 60})
            times.append(time.perf_counter() - started)
    return times


def p99(times: list[float]) -> float:
    return statistics.quantiles(times, n=100)[98] if len(times) >= 2 else times[0]


async def probe_process(base: str, calls: int) -> list[float]:
    """Bob's probe in a process of its own, so the abuser's client work in this process does not
    slow bob's client down (only the server is shared, as with two real clients)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--probe",
        base,
        "--probe-calls",
        str(calls),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "ABUSE_BOB_TOKEN": BOB},
    )
    out, _ = await proc.communicate()
    return [float(t) for t in json.loads(out.decode().strip().splitlines()[-1])]


async def while_running(base: str, calls: int, abuse: Any) -> tuple[Any, float]:
    """Run ``abuse`` and bob's probe together; (abuse result, bob's p99 in ms)."""
    probe = asyncio.create_task(probe_process(base, calls))
    await asyncio.sleep(0.5)  # the probe process is up and calling
    result = await abuse
    times = await probe
    return result, p99(times) * 1000


async def case_bodies(base: str, pid: int) -> str:
    before = peak_rss_mb(pid)

    def chunks() -> Iterator[bytes]:
        block = b"x" * MB
        for _ in range(200):
            yield block

    statuses = []
    with httpx.Client(timeout=TIMEOUT) as http:
        for url, headers in (
            (base + "/admin/operations/op_x/reconcile", {}),
            (base + "/admin/operations/op_x/reconcile", {"Content-Length": str(200 * MB)}),
            (base + "/mcp", {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28"}),
        ):
            try:
                statuses.append(str(http.post(url, content=chunks(), headers=headers).status_code))
            except httpx.HTTPError as exc:  # the server answered 413 and closed while we still sent
                statuses.append(type(exc).__name__)
    after = peak_rss_mb(pid)
    return f"3 x 200 MB unauthenticated -> {', '.join(statuses)}; server peak RSS +{after - before:.0f} MB"


async def case_listens(base: str, count: int) -> str:
    accepted = refused = 0
    async with mcp_client(base, ALICE) as alice, contextlib.AsyncExitStack() as streams:
        for _ in range(count):
            try:
                await streams.enter_async_context(alice.listen(resources_list_changed=True))
                accepted += 1
            except MCPError:
                refused += 1
        async with mcp_client(base, BOB) as bob, bob.listen(resources_list_changed=True):
            bob_ok = True
    other = "listens" if bob_ok else "LOCKED OUT"
    return f"{count} listens of one principal: {accepted} accepted, {refused} refused; another one {other}"


async def case_commits(base: str, count: int) -> Any:
    """Stage ``count`` imports first (not measured), then return the abuse: all their commits at once."""
    async with mcp_client(base, ALICE) as alice:
        handles = []
        for i in range(count):
            handle = (await call(alice, "begin_import", {"target": f"c{i}"}))["handle"]
            await call(alice, "add_records", {"handle": handle, "records": [{"n": n} for n in range(20)]})
            handles.append(handle)

    async def commit_all() -> str:
        async with mcp_client(base, ALICE) as again:

            async def commit(handle: str) -> str:
                try:
                    return str((await call(again, "commit_import", {"handle": handle}))["status"])
                except RuntimeError as exc:
                    return str(exc).split(":", 1)[0]

            outcomes = await asyncio.gather(*(commit(h) for h in handles))
        tally = {o: outcomes.count(o) for o in sorted(set(outcomes))}
        return f"{count} concurrent commits of one tenant: " + ", ".join(f"{n} {o}" for o, n in tally.items())

    return commit_all()


async def case_abort(base: str, megabytes: int) -> tuple[str, Any]:
    async with mcp_client(base, ALICE) as alice:
        handle = (await call(alice, "begin_import", {"target": "big"}))["handle"]
        blob = "x" * (60 * 1024)
        per_call = 16  # about 1 MB per call
        for _ in range(max(1, megabytes * MB // (len(blob) * per_call))):
            await call(alice, "add_records", {"handle": handle, "records": [{"b": blob}] * per_call})
        status = await call(alice, "get_import_status", {"handle": handle})

    async def abort() -> str:
        async with mcp_client(base, ALICE) as again:
            started = time.perf_counter()
            await call(again, "abort_import", {"handle": handle})
            took = time.perf_counter() - started
            return f"abort of {status['record_count']} records (~{megabytes} MB) took {took:.2f} s"

    return status["record_count"], abort()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with (
            fresh_database(args.db, workdir) as db_url,
            running_simulator(
                workdir / "legacy.db", "--idle-timeout", "0", "--latency-ms", str(args.latency_ms)
            ) as legacy,
            server(workdir, db_url, legacy, args) as (base, pid),
        ):
            await bystander(base, 10)  # warm up
            unloaded = p99(await probe_process(base, args.probe_calls)) * 1000
            rows: list[dict[str, Any]] = []

            async def record(name: str, limit: str, loaded: float) -> None:
                rows.append(
                    {
                        "case": name,
                        "limit": limit,
                        "bob_p99_ms": round(loaded, 1),
                        "ratio": round(loaded / unloaded, 2),
                    }
                )
                print(f"{name:8} bob p99 {loaded:7.1f} ms ({loaded / unloaded:4.2f}x)  {limit}", flush=True)

            print(f"unloaded bob p99 {unloaded:.1f} ms ({args.probe_calls} begin_import calls)", flush=True)
            limit, loaded = await while_running(base, args.probe_calls, case_bodies(base, pid))
            await record("bodies", limit, loaded)
            limit, loaded = await while_running(base, args.probe_calls, case_listens(base, args.listens))
            await record("listens", limit, loaded)
            limit, loaded = await while_running(
                base, args.probe_calls, await case_commits(base, args.commits)
            )
            await record("commits", limit, loaded)
            _, abort = await case_abort(base, args.abort_mb)
            limit, loaded = await while_running(base, args.probe_calls, abort)
            await record("abort", limit, loaded)
    return {"db": args.db, "unloaded_p99_ms": round(unloaded, 1), "cases": rows}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--listens", type=int, default=1100)
    parser.add_argument("--commits", type=int, default=45)
    parser.add_argument("--abort-mb", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="simulator latency per command")
    parser.add_argument("--probe-calls", type=int, default=60)
    parser.add_argument("--deadline", type=float, default=900.0, help="the whole run, in seconds")
    parser.add_argument("--probe", metavar="BASE_URL", help=argparse.SUPPRESS)  # the bystander process
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(asyncio.run(bystander(args.probe, args.probe_calls))))
        return

    async def bounded() -> dict[str, Any]:
        return await asyncio.wait_for(run(args), args.deadline)

    print(json.dumps(asyncio.run(bounded())))


if __name__ == "__main__":
    main()
