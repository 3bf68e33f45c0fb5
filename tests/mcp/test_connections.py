"""Connections as ``serve`` runs them (``http/connections.py``: uvicorn with the kit's settings), over
raw sockets so a test can send half a request: half-sent headers and silent sockets are closed
after ``ADAPTER_HTTP_HEADER_TIMEOUT_SECONDS``, a body that does not arrive after
``ADAPTER_HTTP_BODY_TIMEOUT_SECONDS``; a stream the server sends is not cut; past
``ADAPTER_HTTP_MAX_CONNECTIONS`` a request gets 503."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from adapter.bootstrap import Kit
from adapter.entrypoints.http.app import create_app
from adapter.entrypoints.http.connections import uvicorn_options
from tests.support.servers import serve_in_process

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
TIMEOUTS = {"http_header_timeout_seconds": 0.5, "http_body_timeout_seconds": 0.8}


@pytest.fixture
async def served(kit: Kit) -> AsyncIterator[tuple[str, int]]:
    """(host, port) of the app under uvicorn with the options ``serve`` gives it."""
    async with serve_in_process(create_app(kit), **uvicorn_options(kit.settings)) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        yield host, int(port)


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """Seconds until the server closed the connection (reading nothing more), or fail."""
    started = time.monotonic()
    while True:
        data = await asyncio.wait_for(reader.read(65536), seconds)
        if not data:
            return time.monotonic() - started


@contextlib.asynccontextmanager
async def connection(
    address: tuple[str, int],
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection(*address)
    try:
        yield reader, writer
    finally:
        writer.close()


@pytest.mark.parametrize("settings_overrides", [TIMEOUTS])
async def test_half_sent_headers_and_silent_sockets_are_closed(served: tuple[str, int]) -> None:
    async with connection(served) as (silent, _), connection(served) as (half, writer):
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        await writer.drain()
        assert await closed_within(half, 5.0) < 3.0
        assert await closed_within(silent, 5.0) < 3.0


@pytest.mark.parametrize("settings_overrides", [TIMEOUTS])
async def test_a_body_that_trickles_is_closed_at_its_deadline(served: tuple[str, int]) -> None:
    """A byte every 0.2 s renews nothing: the body deadline counts from the end of the headers."""
    host, port = served
    async with connection(served) as (reader, writer):
        writer.write(
            f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n{".encode()
        )
        await writer.drain()
        started = time.monotonic()
        with contextlib.suppress(ConnectionError):
            while time.monotonic() - started < 5.0 and not reader.at_eof():
                writer.write(b" ")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    if not await asyncio.wait_for(reader.read(65536), 0.2):
                        break
        assert time.monotonic() - started < 3.0


@pytest.mark.parametrize("settings_overrides", [TIMEOUTS])
async def test_requests_and_streams_still_work(served: tuple[str, int], kit: Kit) -> None:
    """A quick request is not hurt by the deadlines, nor is a 2025 session's GET stream held open
    well past them (the server sends it; its request was complete)."""
    from tests.support.constants import ALICE_TOKEN

    url = f"http://{served[0]}:{served[1]}/mcp"
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {ALICE_TOKEN}",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    async with httpx.AsyncClient(timeout=30.0) as http:
        opened = await http.post(url, json=initialize, headers=headers)
        assert opened.status_code == 200
        session = {
            **headers,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": LEGACY,
            "Accept": "text/event-stream",
        }
        async with http.stream("GET", url, headers=session) as stream:
            assert stream.status_code == 200
            chunks = stream.aiter_bytes()
            with pytest.raises(TimeoutError):  # nothing to say, and not closed either
                await asyncio.wait_for(anext(chunks), 2.0)
        listed = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**session, "Accept": "application/json, text/event-stream"},
        )
        assert listed.status_code == 200


@pytest.mark.parametrize("settings_overrides", [{"http_max_connections": 3}])
async def test_past_the_connection_limit_a_request_gets_503(served: tuple[str, int]) -> None:
    host, port = served
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    async with contextlib.AsyncExitStack() as held:
        for _ in range(3):
            await held.enter_async_context(connection(served))
        async with connection(served) as (reader, writer):
            writer.write(request)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(65536), 10)
    assert answer.startswith(b"HTTP/1.1 503")
    async with connection(served) as (reader, writer):  # the others gone: served again
        writer.write(request)
        await writer.drain()
        assert (await asyncio.wait_for(reader.read(65536), 10)).startswith(b"HTTP/1.1 200")


def test_the_options_follow_the_settings(kit: Kit) -> None:
    options = uvicorn_options(kit.settings.model_copy(update={"trusted_proxies": ["10.0.0.1"]}))
    assert options["proxy_headers"] is True and options["forwarded_allow_ips"] == ["10.0.0.1"]
    assert uvicorn_options(kit.settings)["proxy_headers"] is False
    assert options["timeout_keep_alive"] == kit.settings.http_keep_alive_seconds
    assert options["limit_concurrency"] == kit.settings.http_max_connections
    assert options["http"].header_timeout == kit.settings.http_header_timeout_seconds
