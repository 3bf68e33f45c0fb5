"""Harness for the MCP server over real HTTP: the kit on a real database, the simulator over TCP.

* ``settings_overrides``: a dict of ``load_settings`` overrides; a test overrides it with
  ``@pytest.mark.parametrize("settings_overrides", [{...}])`` (``{"tokens": None}`` is local mode).
* ``kit``: ``adapter.bootstrap.build`` on the migrated ``store`` (SQLite and PostgreSQL) with a token
  file of two principals (alice@acme, bob@acme), ``page_size=3`` and ``legacy_url=tcp://...``.
* ``server``: ``create_app(kit)`` served by uvicorn in-process on 127.0.0.1:0; a :class:`Running`
  with ``url``, ``kit``, ``client(...)`` (an SDK client over httpx2) and ``raw(...)`` (plain httpx).

Tests here import nothing from this file (pytest's importlib mode): everything is reached through
the ``server`` fixture, whose helpers are methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import jsonschema
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from adapter.bootstrap import Kit, build
from adapter.config import load_settings
from adapter.entrypoints.http.app import create_app
from adapter.store import Store

PROTOCOL_VERSION = "2026-07-28"
SECRET = "test-secret-" + secrets.token_hex(24)
ALICE_TOKEN = "alice-token-" + secrets.token_hex(12)
BOB_TOKEN = "bob-token-" + secrets.token_hex(12)
TIMEOUT = 30.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {}


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps(
            {
                ALICE_TOKEN: {"principal": "alice", "tenant": "acme"},
                BOB_TOKEN: {"principal": "bob", "tenant": "acme"},
            }
        )
    )
    return path


@pytest.fixture
def kit(
    store: Store,
    db_url: str,
    legacy_address: tuple[str, int],
    tokens_file: Path,
    settings_overrides: dict[str, Any],
    tmp_path: Path,
) -> Iterator[Kit]:
    host, port = legacy_address
    values: dict[str, Any] = {
        "database_url": db_url,
        "legacy_url": f"tcp://{host}:{port}",
        "secret": SECRET,
        "secret_file": str(tmp_path / "unused.secret"),
        "tokens": str(tokens_file),
        "page_size": 3,
        "legacy_timeout_seconds": 10.0,
    }
    values.update(settings_overrides)
    kit = build(load_settings(**values), store=store)
    yield kit
    kit.close()


@contextlib.asynccontextmanager
async def serve_in_process(app: Any) -> AsyncIterator[str]:
    """uvicorn on 127.0.0.1:0 in this event loop; yields the base URL, stops with should_exit."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        with anyio.fail_after(10):
            while not server.started:
                if task.done():
                    task.result()  # raises the start-up error
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with anyio.fail_after(15):
            await task


def mcp_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def modern_meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def parse_body(response: httpx.Response) -> Any:
    """The JSON-RPC message of a response, JSON or SSE (the last ``data:`` carrying an ``id``)."""
    if not response.content:
        return None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        final = None
        for line in response.text.splitlines():
            if line.startswith("data:"):
                message = json.loads(line[5:].strip())
                if "id" in message:
                    final = message
        return final
    try:
        return response.json()
    except ValueError:
        return response.text


@dataclass
class Running:
    """One running server: its URL, its kit, and ways to talk to it."""

    base_url: str
    kit: Kit

    alice_token = ALICE_TOKEN
    bob_token = BOB_TOKEN

    @property
    def url(self) -> str:
        return self.base_url + "/mcp"

    @contextlib.asynccontextmanager
    async def client(
        self,
        token: str | None = ALICE_TOKEN,
        *,
        elicitation_callback: Any = None,
        event_hooks: dict[str, list[Any]] | None = None,
        mode: str = "auto",
        message_handler: Any = None,
    ) -> AsyncIterator[Client]:
        """An SDK client over Streamable HTTP (httpx2), with no response cache (lists stay fresh).

        ``mode="legacy"`` speaks the 2025-11-25 initialize handshake (one session per client).
        """
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(TIMEOUT, read=60.0), event_hooks=event_hooks or {}
        ) as http:
            transport = streamable_http_client(self.url, http_client=http)
            async with Client(
                transport,
                elicitation_callback=elicitation_callback,
                cache=None,
                read_timeout_seconds=TIMEOUT,
                mode=mode,  # type: ignore[arg-type]
                message_handler=message_handler,
            ) as client:
                yield client

    async def raw(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        token: str | None = ALICE_TOKEN,
        name: str | None = None,
        headers: dict[str, str] | None = None,
        request_id: int = 1,
    ) -> tuple[httpx.Response, Any]:
        """One JSON-RPC request POSTed with plain httpx and the 2026-07-28 headers and ``_meta``."""
        body_params = {**(params or {}), "_meta": modern_meta()}
        all_headers = mcp_headers(method, name)
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        all_headers.update(headers or {})
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            response = await http.post(self.url, json=message, headers=all_headers)
        return response, parse_body(response)

    # --- assertions shared by the tests ------------------------------------------------------

    @staticmethod
    def structured(result: CallToolResult) -> dict[str, Any]:
        """The structured result of a successful call, checked to mirror its text block."""
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
        assert texts, "a tool result with structured content carries a text block too"
        assert json.loads(texts[0]) == result.structured_content
        return result.structured_content

    @staticmethod
    def error_text(result: CallToolResult) -> str:
        assert result.is_error, result.structured_content
        [block] = result.content
        return block.text  # type: ignore[union-attr]

    @staticmethod
    async def check_output_schema(client: Client, name: str, structured: dict[str, Any]) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        schema = tools[name].output_schema
        assert schema, f"{name} publishes an outputSchema"
        jsonschema.validate(structured, schema, cls=jsonschema.Draft202012Validator)

    async def stage(self, client: Client, records: list[dict[str, Any]], target: str = "customers") -> str:
        """begin_import + add_records in chunks of 1000; returns the handle."""
        handle = self.structured(await client.call_tool("begin_import", {"target": target}))["handle"]
        for start in range(0, len(records), 1000):
            chunk = records[start : start + 1000]
            added = self.structured(
                await client.call_tool("add_records", {"handle": handle, "records": chunk})
            )
            assert added["accepted"] == len(chunk)
        return handle


@pytest.fixture
async def server(kit: Kit) -> AsyncIterator[Running]:
    async with serve_in_process(create_app(kit)) as base_url:
        yield Running(base_url, kit)


@pytest.fixture
def make_records() -> Any:
    def make(n: int, tag: str = "r") -> list[dict[str, Any]]:
        return [{"id": i, "name": f"{tag} {i}"} for i in range(n)]

    return make
