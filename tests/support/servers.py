"""Real servers for tests: the HTTP app under uvicorn on a free loopback port, and the stdio server
as the subprocess a host would start. Both stop cleanly when the test is done."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp import Client, StdioServerParameters

from tests.support.constants import TIMEOUT
from tests.support.wait import wait_until, wait_until_async

START_TIMEOUT = 10.0
STOP_TIMEOUT = 15.0


def free_port() -> int:
    """A loopback port nothing listens on now, for a server started as its own process."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(process: subprocess.Popen[Any], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM, so the server shuts down as in production; SIGKILL if it has not exited in time."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def _uvicorn(app: Any, options: dict[str, Any]) -> uvicorn.Server:
    """``options``: more uvicorn settings (``uvicorn_options(settings)``, as ``serve`` runs it; ``port``
    to pick one, else any free one)."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        **{"port": 0, "log_level": "warning", "lifespan": "on", "timeout_graceful_shutdown": 5, **options},
    )
    return uvicorn.Server(config)


def _base_url(server: uvicorn.Server) -> str:
    port = server.servers[0].sockets[0].getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def serve_in_thread(app: Any, **options: Any) -> Iterator[str]:
    """uvicorn on 127.0.0.1:0 in a thread of its own (so blocking clients may drive it); yields the
    base URL. ``options`` are more uvicorn settings."""
    server = _uvicorn(app, options)
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    try:

        def started() -> bool:
            if not thread.is_alive():
                raise RuntimeError("uvicorn stopped before it started")
            return bool(server.started)

        wait_until(started, START_TIMEOUT, what="uvicorn start-up")
        yield _base_url(server)
    finally:
        server.should_exit = True
        thread.join(STOP_TIMEOUT)


@contextlib.asynccontextmanager
async def serve_in_process(app: Any, **options: Any) -> AsyncIterator[str]:
    """uvicorn on 127.0.0.1 in this event loop (async clients); yields the base URL. ``options`` are
    more uvicorn settings; a server that must know its own URL first (an OAuth audience) passes
    ``port=free_port()``."""
    server = _uvicorn(app, options)
    task = asyncio.create_task(server.serve())
    try:

        def started() -> bool:
            if task.done():
                task.result()  # raises the start-up error
                raise RuntimeError("uvicorn stopped before it started")
            return bool(server.started)

        await wait_until_async(started, START_TIMEOUT, what="uvicorn start-up")
        yield _base_url(server)
    finally:
        server.should_exit = True
        with anyio.fail_after(STOP_TIMEOUT):
            await task


# --- stdio -------------------------------------------------------------------------------------------

STDIO_COMMAND = [sys.executable, "-m", "adapter", "stdio"]


def stdio_client(env: dict[str, str], cwd: Path, **options: Any) -> Client:
    """The SDK's client over ``python -m adapter stdio`` started with ``env`` (``ADAPTER_*``) in ``cwd``;
    ``options`` go to ``Client`` (``mode="legacy"``, callbacks)."""
    params = StdioServerParameters(command=STDIO_COMMAND[0], args=STDIO_COMMAND[1:], env=env, cwd=cwd)
    return Client(params, cache=None, read_timeout_seconds=TIMEOUT, **options)


@contextlib.contextmanager
def stdio_process(env: dict[str, str], cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m adapter stdio`` as a raw subprocess (pipes for stdin and stdout); killed if it
    has not exited by the end."""
    process = subprocess.Popen(
        STDIO_COMMAND,
        cwd=cwd,
        env={**os.environ, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def send_line(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    """One JSON-RPC message, newline-framed, to the process's stdin."""
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def read_line(process: subprocess.Popen[bytes], timeout: float = TIMEOUT) -> bytes:
    """The next line of the process's stdout; TimeoutError when none comes in ``timeout`` seconds."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no line on stdout")
        ready, _, _ = select.select([process.stdout], [], [], left)
        if ready:
            return process.stdout.readline()
