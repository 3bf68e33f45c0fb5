"""Harness for resource-server mode: a real OpenID provider, the kit served on a port chosen first.

* ``idp``: one ``oidc-provider`` process for the session (``tests/support/idp.py``); tests that
  change the provider (key rotation) start their own.
* ``mcp_port``: the port the server will listen on, chosen before the kit is built, because the
  server's audience (its canonical ``/mcp`` URL) is a setting.
* ``kit``: the root conftest's kit in resource-server mode (no token file; ``ADAPTER_OAUTH_ISSUER``
  the provider, ``ADAPTER_OAUTH_AUDIENCE`` this server); ``settings_overrides`` adds to it.
* ``server``: ``create_app(kit)`` under uvicorn on ``mcp_port``: an :class:`OAuthServer`.

These tests run on SQLite only: what they prove is about tokens and HTTP, and the store's handling
of principals is proven on both databases by the rest of the suite.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from adapter.bootstrap import Kit
from adapter.entrypoints.http.app import create_app
from tests.support.constants import TIMEOUT
from tests.support.idp import INSTALLED, Provider, running_provider
from tests.support.mcp import mcp_headers, modern_meta, parse_body
from tests.support.servers import free_port, serve_in_process


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'adapter.db'}"


@pytest.fixture(scope="session")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    if not INSTALLED:
        pytest.skip("oidc-provider not installed: run `make node-clients` (npm ci in tests/node)")
    with running_provider(tmp_path_factory.mktemp("idp")) as provider:
        yield provider


@pytest.fixture
def mcp_port() -> int:
    return free_port()


@pytest.fixture
def audience(mcp_port: int) -> str:
    return f"http://127.0.0.1:{mcp_port}/mcp"


@pytest.fixture
def kit_defaults(idp: Provider, audience: str) -> dict[str, Any]:
    return {"tokens": None, "oauth_issuer": idp.issuer, "oauth_audience": audience, "page_size": 3}


@dataclass
class OAuthServer:
    """A running server in resource-server mode, and ways to talk to it."""

    base_url: str
    kit: Kit

    @property
    def url(self) -> str:
        return self.base_url + "/mcp"

    async def raw(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        token: str | None,
        name: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[httpx.Response, Any]:
        """One 2026-07-28 JSON-RPC request with plain httpx (headers and ``_meta`` as the spec says)."""
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {**(params or {}), "_meta": modern_meta()},
        }
        all_headers = {**mcp_headers(method, name, token=token), **(headers or {})}
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            response = await http.post(self.url, json=message, headers=all_headers)
        return response, parse_body(response)

    async def call(
        self, tool: str, arguments: dict[str, Any], *, token: str | None
    ) -> tuple[httpx.Response, Any]:
        return await self.raw("tools/call", {"name": tool, "arguments": arguments}, token=token, name=tool)

    async def legacy_call(
        self, tool: str, arguments: dict[str, Any], *, token: str | None
    ) -> tuple[httpx.Response, Any]:
        """The same call in the 2025 era: ``initialize``, then ``tools/call`` on that session."""
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            started = await http.post(self.url, json=init, headers=headers)
            if started.status_code != 200:
                return started, parse_body(started)
            session = {
                "Mcp-Session-Id": started.headers["mcp-session-id"],
                "MCP-Protocol-Version": "2025-11-25",
            }
            await http.post(
                self.url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers={**headers, **session},
            )
            message = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
            response = await http.post(self.url, json=message, headers={**headers, **session})
        return response, parse_body(response)

    @contextlib.asynccontextmanager
    async def client(
        self, token: str, *, mode: str = "auto", elicitation_callback: Any = None
    ) -> AsyncIterator[Client]:
        """The SDK's client with a token it was handed (no OAuth of its own)."""
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT) as http,
            Client(
                streamable_http_client(self.url, http_client=http),
                cache=None,
                read_timeout_seconds=TIMEOUT,
                mode=mode,  # type: ignore[arg-type]
                elicitation_callback=elicitation_callback,
            ) as client,
        ):
            yield client

    @staticmethod
    def structured(result: CallToolResult) -> dict[str, Any]:
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        return result.structured_content


@pytest.fixture
async def server(kit: Kit, mcp_port: int) -> AsyncIterator[OAuthServer]:
    async with serve_in_process(create_app(kit), port=mcp_port) as base_url:
        yield OAuthServer(base_url, kit)
