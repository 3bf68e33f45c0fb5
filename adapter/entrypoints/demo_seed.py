"""The part of ``make demo`` that follows seed 001's walkthrough, checking each promise.

* statelessness: a second server *process* on the same database; a handle begun on one is used on
  the other, and no response anywhere carries an ``Mcp-Session-Id``;
* two commits in parallel (the simulator slowed so they overlap, which is checked), each with its
  own progress token: each stream carries only its own;
* a client-side cache: ``resources/list`` within its ``ttlMs`` is served without a request, and a
  forced refresh asks the server again and sees what changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from legacy_sim.client import LegacyClient

__all__ = ["HeaderWatch", "second_server_process", "seed_walkthrough"]

SESSION_HEADER = b"mcp-session-id"


class HeaderWatch:
    """ASGI middleware: notes whether any request or response through it carried ``Mcp-Session-Id``.

    The demo wraps its in-process server with it, so the statelessness check covers every step, not
    only the requests its own clients send.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = 0
        self.session_headers = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.requests += 1
        self._note(scope["headers"])

        async def watched(message: Any) -> None:
            if message["type"] == "http.response.start":
                self._note(message.get("headers", []))
            await send(message)

        await self.app(scope, receive, watched)

    def _note(self, headers: Any) -> None:
        if any(name.lower() == SESSION_HEADER for name, _ in headers):
            self.session_headers += 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def second_server_process(env: dict[str, str]) -> AsyncIterator[str]:
    """``python -m adapter serve`` as its own OS process with the given ``ADAPTER_*`` settings."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "adapter", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient() as http:
            while True:
                if process.poll() is not None:
                    raise RuntimeError("the second server process stopped before it served")
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError("the second server process did not start within 30 s")
                await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _Wire:
    """Counts the POSTs per MCP method and remembers every request and response header name seen."""

    def __init__(self) -> None:
        self.posts: dict[str, int] = {}
        self.header_names: set[str] = set()

    async def on_request(self, request: httpx2.Request) -> None:
        method = request.headers.get("mcp-method", "?")
        self.posts[method] = self.posts.get(method, 0) + 1
        self.header_names.update(name.lower() for name in request.headers)

    async def on_response(self, response: httpx2.Response) -> None:
        self.header_names.update(name.lower() for name in response.headers)

    def client(self, url: str, token: str, **kwargs: Any) -> Client:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            event_hooks={"request": [self.on_request], "response": [self.on_response]},
            timeout=httpx2.Timeout(30.0, read=120.0),
        )
        return Client(streamable_http_client(url, http_client=http), **kwargs)


def _data(result: Any) -> dict[str, Any]:
    if result.is_error:
        raise RuntimeError(result.content[0].text)
    return dict(result.structured_content or {})


async def seed_walkthrough(
    urls: tuple[str, str],
    token: str,
    check: Callable[[bool, str], None],
    legacy: LegacyClient,
    total: int = 700,
) -> None:
    """Run the three checks on two servers (two processes) over one database."""
    wire = _Wire()
    first, second = urls

    print("11. stateless: two server processes, one database; a handle works on either")
    async with wire.client(first, token) as one, wire.client(second, token) as two:
        handle = _data(await one.call_tool("begin_import", {"target": "orders"}))["handle"]
        rows = [{"order": i} for i in range(3)]
        added = _data(await two.call_tool("add_records", {"handle": handle, "records": rows}))
        seen = _data(await one.call_tool("get_import_status", {"handle": handle}))
    check(added["record_count"] == 3 and seen["record_count"] == 3, "begun on one, staged on the other")

    print("12. two commits in parallel: each progress stream carries only its own commit")
    sizes = {"a": total, "b": total // 2 + 1}
    streams: dict[str, list[tuple[float, float | None]]] = {name: [] for name in sizes}
    times: dict[str, list[float]] = {name: [] for name in sizes}
    handles: dict[str, str] = {}
    async with wire.client(first, token) as one:
        for name, size in sizes.items():
            handles[name] = _data(await one.call_tool("begin_import", {"target": f"parallel-{name}"}))[
                "handle"
            ]
            batch = [{"line": i} for i in range(size)]
            await one.call_tool("add_records", {"handle": handles[name], "records": batch})

    async def commit(name: str, url: str) -> dict[str, Any]:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            streams[name].append((progress, total))
            times[name].append(time.monotonic())

        async with wire.client(url, token) as c:
            return _data(
                await c.call_tool("commit_import", {"handle": handles[name]}, progress_callback=on_progress)
            )

    legacy.faults(latency_ms=2)  # about a second per 500 records: long enough for the two to overlap
    try:
        done = await asyncio.gather(commit("a", first), commit("b", second))
    finally:
        legacy.faults(latency_ms=0)
    for (name, size), result in zip(sizes.items(), done, strict=True):
        values = [v for v, _ in streams[name]]
        print(f"   {name}: {len(values)} progress notifications, {values[0]:g} .. {values[-1]:g} of {size}")
        check(
            result["status"] == "committed"
            and {of for _, of in streams[name]} == {size}
            and values == sorted(set(values))
            and values[-1] == size,
            f"commit {name}: only its own progress, strictly increasing to {size}",
        )
    overlap = min(t[-1] for t in times.values()) - max(t[0] for t in times.values())
    check(overlap > 0, f"the two commits ran at the same time ({overlap:.1f} s of progress overlapped)")

    print("13. a client cache: resources/list within ttlMs needs no request; a forced refresh asks again")
    async with wire.client(first, token) as cached:
        before = wire.posts.get("resources/list", 0)
        listed = await cached.list_resources()
        again = await cached.list_resources()
        hits = wire.posts.get("resources/list", 0) - before
        check(
            hits == 1 and again == listed, f"second list within ttlMs={listed.ttl_ms} served from the cache"
        )
        fresh = _data(await cached.call_tool("begin_import", {"target": "late"}))["handle"]
        refreshed = await cached.list_resources(cache_mode="refresh")
    check(
        wire.posts.get("resources/list", 0) - before == 2
        and f"import://{fresh}" in {r.uri for r in refreshed.resources},
        "the forced refresh went to the server and shows the new import",
    )
    check("mcp-session-id" not in wire.header_names, "no Mcp-Session-Id on any request or response here")


def settings_env(database_url: str, legacy: tuple[str, int], secret: str, tokens: Path) -> dict[str, str]:
    """The ``ADAPTER_*`` environment of a second process that shares the first one's database."""
    return {
        "ADAPTER_DATABASE_URL": database_url,
        "ADAPTER_LEGACY_URL": f"tcp://{legacy[0]}:{legacy[1]}",
        "ADAPTER_SECRET": secret,
        "ADAPTER_TOKENS": str(tokens),
    }
