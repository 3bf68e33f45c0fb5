"""Abuse cases against a running server, and what they cost another tenant (issues 10 and 21).

Everything binds 127.0.0.1 and the whole run is bounded by ``--deadline`` seconds. The server runs
as ``python -m adapter serve`` (``--workers N`` with PostgreSQL) in a child process (token mode, the
simulator over TCP as another child with ``--latency-ms`` per command), on a fresh SQLite file or
PostgreSQL schema, with the kit's default limits. Two principals in two tenants: alice@acme does the
abuse, bob@globex is the bystander whose latency is measured.

The cases (each prints the limit that held and bob's p99 ``begin_import`` latency while it ran):

1. ``bodies``: unauthenticated 200 MB bodies: chunked to an ``/admin`` action, declared by
   Content-Length to ``/admin``, chunked to ``/mcp``. The server's peak RSS (``VmHWM``) before and
   after says whether a body was read.
2. ``listens``: alice opens ``--listens`` ``subscriptions/listen`` streams at once; how many were
   accepted, and whether bob can still listen.
3. ``commits``: alice stages ``--commits`` imports (not measured), then commits them all at once
   against the slow simulator; how many ran and how many were refused (``quota_exceeded``).
4. ``abort``: alice stages ``--abort-mb`` MB of records in one import (not measured) and aborts it.
5. ``sessions``: ``--flooders`` clients of alice open 2025-era sessions (``initialize``) as fast as
   they can while bob's probe runs; how many were opened and refused, and whether bob can still
   open one afterwards.
6. ``nested``: two clients of alice send 3.9 MB ``add_records`` bodies of nested empty arrays
   (1.3 million values each) over and over.
7. ``staging``: eight clients of alice send ordinary 3.9 MB ``add_records`` calls (1,000 records of
   3.9 KB) over and over, each into its own import; what was staged, and how it was refused.
8. ``slow``: alice holds ``--slow`` connections that send a request's headers a byte a second (and
   as many that send nothing), reconnecting whenever the server closes one.

Cases 5 to 8 run for as long as bob's probe does. Bob's unloaded p99 is measured first, again just
before each case (the machine is shared: its own load moves between minutes) and at the end; the
target is that every loaded p99 stays within 3x of the unloaded one (both ratios are printed). The
server's memory (RSS of every process of it: the supervisor and its workers) is sampled every 0.2 s
throughout; the target is at most 300 MB.

Usage::

    .venv/bin/python bench/abuse.py                             # SQLite, one worker
    .venv/bin/python bench/abuse.py --db postgres --workers 2 --abort-mb 330
    .venv/bin/python bench/abuse.py --cases sessions,nested,staging,slow
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
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
LOAD_AT_START = os.getloadavg()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _status_mb(pid: int, field: str) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def server_pids(pid: int) -> list[int]:
    """The server process and its children (the workers of ``serve --workers N``)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid:
                children.append(int(entry.name))
    return [pid, *children]


def peak_rss_mb(pid: int) -> float:
    """The highest peak RSS (``VmHWM``) of any process of the server."""
    return max(_status_mb(p, "VmHWM") for p in server_pids(pid))


class MemorySampler:
    """The server's RSS (its processes summed, and the largest one) every 0.2 s, in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.max_total = self.max_process = 0.0
        self.at_start = self.now()
        self.max_by_process: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now(self) -> dict[int, float]:
        return {p: _status_mb(p, "VmRSS") for p in server_pids(self.pid)}

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            sizes = self.now()
            self.max_total = max(self.max_total, sum(sizes.values()))
            self.max_process = max(self.max_process, *sizes.values())
            for pid, size in sizes.items():
                self.max_by_process[pid] = max(self.max_by_process.get(pid, 0.0), size)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


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
    env.update(setting.split("=", 1) for setting in args.server_env)  # type: ignore[misc]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "adapter",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(args.workers),
        ],
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
        print(f"server pid {proc.pid} at {base}", file=sys.stderr, flush=True)
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
    """One tool call; a refusal that says when to try again (a staging rate, the request budget) is
    waited out as it says: the set-up of a case stages more than a second's allowance."""
    while True:
        try:
            result = await client.call_tool(name, arguments)
        except MCPError as exc:  # the request budget: 429 with -32029 and data.retry_after
            if not isinstance(exc.error.data, dict) or "retry_after" not in exc.error.data:
                raise
            await asyncio.sleep(float(exc.error.data["retry_after"]))
            continue
        if not result.is_error:
            assert isinstance(result.structured_content, dict)
            return result.structured_content
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        wait = re.search(r"try again in ([0-9.]+) s", text)
        if wait is None:
            raise RuntimeError(text)
        await asyncio.sleep(float(wait.group(1)))


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


# --- issue 21: attacks that run for as long as bob's probe ------------------------------------------

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"},
        },
    }
).encode()


def legacy_headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }


def add_headers(token: str) -> dict[str, str]:
    return {
        **legacy_headers(token),
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "add_records",
    }


def add_body(handle: str, records: bytes) -> bytes:
    """A raw 2026-07-28 ``add_records`` request around an already encoded ``records`` array."""
    return (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_records","arguments":'
        b'{"handle":"'
        + handle.encode()
        + b'","records":'
        + records
        + b'},"_meta":'
        + json.dumps(META).encode()
        + b"}}"
    )


def outcome_of(response: httpx.Response) -> str:
    """One word for how a raw call ended: the HTTP status, and for a 200 the tool's code."""
    if response.status_code != 200:
        return str(response.status_code)
    text = response.text
    if '"isError":true' in text.replace(" ", ""):
        marker = text.find('"text":"')
        return "200 " + text[marker + 8 :].split(":", 1)[0] if marker >= 0 else "200 error"
    return "200 ok"


Attack = Callable[[str, asyncio.Event], Awaitable[str]]


async def until_stopped(stop: asyncio.Event, clients: int, one: Callable[[int], Awaitable[None]]) -> None:
    async def loop(index: int) -> None:
        while not stop.is_set():
            await one(index)

    await asyncio.gather(*(loop(i) for i in range(clients)))


def flood_sessions(flooders: int) -> Attack:
    async def attack(base: str, stop: asyncio.Event) -> str:
        tally: Counter[str] = Counter()
        async with httpx.AsyncClient(timeout=TIMEOUT, limits=httpx.Limits(max_connections=flooders)) as http:

            async def one(_: int) -> None:
                try:
                    response = await http.post(
                        base + "/mcp", content=INITIALIZE, headers=legacy_headers(ALICE)
                    )
                    tally[str(response.status_code)] += 1
                except httpx.HTTPError as exc:
                    tally[type(exc).__name__] += 1

            await until_stopped(stop, flooders, one)
            bob = await http.post(base + "/mcp", content=INITIALIZE, headers=legacy_headers(BOB))
        opened, refused = tally.pop("200", 0), tally.pop("429", 0)
        rest = "".join(f", {n} {what}" for what, n in sorted(tally.items()))
        other = "opens one" if bob.status_code == 200 else f"LOCKED OUT ({bob.status_code})"
        return (
            f"{opened + refused + sum(tally.values())} initialize of one principal: {opened} opened, "
            f"{refused} refused (429){rest}; another principal {other}"
        )

    return attack


NESTED = b"[" + b",".join([b"[]"] * 1_300_000) + b"]"  # 3.9 MB, 1.3 million values


def nested_arrays(clients: int = 2) -> Attack:
    async def attack(base: str, stop: asyncio.Event) -> str:
        tally: Counter[str] = Counter()
        body = add_body("imp_" + "x" * 32, NESTED)
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:

            async def one(_: int) -> None:
                try:
                    tally[
                        outcome_of(await http.post(base + "/mcp", content=body, headers=add_headers(ALICE)))
                    ] += 1
                except httpx.HTTPError as exc:  # refused while still sending: the server closed
                    tally[type(exc).__name__] += 1

            await until_stopped(stop, clients, one)
        return f"{clients} clients, {len(body) / MB:.1f} MB of nested arrays a call: " + ", ".join(
            f"{n} x {what}" for what, n in sorted(tally.items())
        )

    return attack


def staging_flood(clients: int = 8) -> Attack:
    async def attack(base: str, stop: asyncio.Event) -> str:
        tally: Counter[str] = Counter()
        staged = 0
        records = json.dumps(
            [{"id": n, "name": f"customer {n}", "notes": "x" * 3800} for n in range(1000)],
            separators=(",", ":"),
        ).encode()
        async with mcp_client(base, ALICE) as alice:
            handles = [
                (await call(alice, "begin_import", {"target": f"flood{i}"}))["handle"] for i in range(clients)
            ]
        bodies = [add_body(handle, records) for handle in handles]
        started = time.perf_counter()
        async with httpx.AsyncClient(timeout=TIMEOUT, limits=httpx.Limits(max_connections=clients)) as http:

            async def one(index: int) -> None:
                nonlocal staged
                try:
                    response = await http.post(
                        base + "/mcp", content=bodies[index], headers=add_headers(ALICE)
                    )
                except httpx.HTTPError as exc:
                    tally[type(exc).__name__] += 1
                    return
                outcome = outcome_of(response)
                tally[outcome] += 1
                if (
                    outcome == "200 ok"
                ):  # a polite client would wait Retry-After after a 429; this one does not
                    staged += len(records)

            await until_stopped(stop, clients, one)
        took = time.perf_counter() - started
        return (
            f"{clients} clients of {len(bodies[0]) / MB:.1f} MB adds: staged {staged / MB:.0f} MB "
            f"in {took:.0f} s "
            f"({staged / MB / took:.1f} MB/s); "
            + ", ".join(f"{n} x {what}" for what, n in sorted(tally.items()))
        )

    return attack


def slow_connections(count: int) -> Attack:
    async def attack(base: str, stop: asyncio.Event) -> str:
        host, port = base.removeprefix("http://").split(":")
        lifetimes: list[float] = []
        opened = 0

        async def one(index: int) -> None:
            nonlocal opened
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
            except OSError:
                await asyncio.sleep(0.5)
                return
            opened += 1
            started = time.monotonic()
            header = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: ".encode()
            try:
                sent = 0
                while not stop.is_set():
                    if index % 2 == 0 and sent < len(header):  # half trickle headers, half say nothing
                        writer.write(header[sent : sent + 1])
                        sent += 1
                        await writer.drain()
                    with contextlib.suppress(TimeoutError):
                        if not await asyncio.wait_for(reader.read(1024), 1.0):
                            lifetimes.append(time.monotonic() - started)  # the server closed it
                            return
            except OSError:
                lifetimes.append(time.monotonic() - started)
            finally:
                writer.close()

        await until_stopped(stop, count, one)
        held = statistics.median(lifetimes) if lifetimes else float("nan")
        return (
            f"{count} slow connections held at once ({opened} opened in all): {len(lifetimes)} closed by the "
            f"server, after a median {held:.1f} s"
        )

    return attack


async def while_attacking(base: str, calls: int, attack: Attack, warm_up: float = 1.0) -> tuple[str, float]:
    """Run ``attack`` until bob's probe is done; (what the attack saw, bob's p99 in ms). Bob starts
    after ``warm_up`` seconds, when the attack is in full swing."""
    stop = asyncio.Event()
    running = asyncio.create_task(attack(base, stop))
    await asyncio.sleep(warm_up)
    times = await probe_process(base, calls)
    stop.set()
    seen = await asyncio.wait_for(running, TIMEOUT)
    await asyncio.sleep(2.0)  # alice's budgets refill before the next case sets itself up
    return seen, p99(times) * 1000


async def run(args: argparse.Namespace) -> dict[str, Any]:
    cases = set(args.cases.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with (
            fresh_database(args.db, workdir) as db_url,
            running_simulator(
                workdir / "legacy.db", "--idle-timeout", "0", "--latency-ms", str(args.latency_ms)
            ) as legacy,
            server(workdir, db_url, legacy, args) as (base, pid),
            MemorySampler(pid) as memory,
        ):
            await bystander(base, 10)  # warm up
            unloaded = p99(await probe_process(base, args.probe_calls)) * 1000
            rows: list[dict[str, Any]] = []

            async def baseline() -> float:
                """Bob's unloaded p99 just before a case: the machine is shared, and its own load
                moves between minutes; each case is also compared with this neighbour."""
                return p99(await probe_process(base, args.probe_calls)) * 1000

            async def record(name: str, limit: str, loaded: float, before: float) -> None:
                rows.append(
                    {
                        "case": name,
                        "limit": limit,
                        "bob_p99_ms": round(loaded, 1),
                        "unloaded_just_before_ms": round(before, 1),
                        "ratio": round(loaded / unloaded, 2),
                        "ratio_to_just_before": round(loaded / before, 2),
                        "server_rss_mb_so_far": round(memory.max_total),
                    }
                )
                print(
                    f"{name:8} bob p99 {loaded:7.1f} ms ({loaded / unloaded:4.2f}x; unloaded just before "
                    f"{before:.1f} ms, {loaded / before:4.2f}x)  {limit}",
                    flush=True,
                )

            print(f"unloaded bob p99 {unloaded:.1f} ms ({args.probe_calls} begin_import calls)", flush=True)
            if "bodies" in cases:
                before = await baseline()
                limit, loaded = await while_running(base, args.probe_calls, case_bodies(base, pid))
                await record("bodies", limit, loaded, before)
            if "listens" in cases:
                before = await baseline()
                limit, loaded = await while_running(base, args.probe_calls, case_listens(base, args.listens))
                await record("listens", limit, loaded, before)
            if "commits" in cases:
                commits = await case_commits(base, args.commits)
                before = await baseline()
                limit, loaded = await while_running(base, args.probe_calls, commits)
                await record("commits", limit, loaded, before)
            if "abort" in cases:
                _, abort = await case_abort(base, args.abort_mb)
                before = await baseline()
                limit, loaded = await while_running(base, args.probe_calls, abort)
                await record("abort", limit, loaded, before)
            attacks: dict[str, Attack] = {
                "sessions": flood_sessions(args.flooders),
                "nested": nested_arrays(),
                "staging": staging_flood(),
                "slow": slow_connections(args.slow),
            }
            # The slow connections are closed after the header timeout (10 s by default): bob's probe
            # starts after it, while the server is closing them and they are opened again.
            warm_ups = {"slow": 11.0}
            for name, attack in attacks.items():
                if name in cases:
                    before = await baseline()
                    limit, loaded = await while_attacking(
                        base, args.probe_calls, attack, warm_ups.get(name, 1.0)
                    )
                    await record(name, limit, loaded, before)
            unloaded_after = p99(await probe_process(base, args.probe_calls)) * 1000
            print(f"unloaded bob p99 at the end {unloaded_after:.1f} ms", flush=True)
            print(
                f"server RSS: at most {memory.max_total:.0f} MB in all, {memory.max_process:.0f} MB in one "
                f"process; by process at the start / at most: "
                + ", ".join(
                    f"{p} {memory.at_start.get(p, 0):.0f}/{top:.0f}"
                    for p, top in memory.max_by_process.items()
                ),
                flush=True,
            )
    return {
        "db": args.db,
        "workers": args.workers,
        "unloaded_p99_ms": round(unloaded, 1),
        "unloaded_p99_ms_at_end": round(unloaded_after, 1),
        "server_rss_mb_max": round(memory.max_total),
        "server_rss_mb_max_one_process": round(memory.max_process),
        "load_average_at_start": LOAD_AT_START,
        "cases": rows,
    }


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
    parser.add_argument("--workers", type=int, default=1, help="server workers (>1 needs --db postgres)")
    parser.add_argument(
        "--server-env", action="append", default=[], metavar="ADAPTER_X=VALUE", help="a setting of the server"
    )
    parser.add_argument("--flooders", type=int, default=8, help="clients of the session flood")
    parser.add_argument("--slow", type=int, default=200, help="slow connections held at once")
    parser.add_argument(
        "--cases",
        default="bodies,listens,commits,abort,sessions,nested,staging,slow",
        help="comma list of the cases to run, in this order",
    )
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
