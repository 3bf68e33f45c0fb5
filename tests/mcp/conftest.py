"""Harness for the MCP server over real HTTP: the kit on a real database, the simulator over TCP.

* ``settings_overrides``: a dict of ``load_settings`` overrides; a test overrides it with
  ``@pytest.mark.parametrize("settings_overrides", [{...}])`` (``{"tokens": None}`` is local mode).
* ``kit`` (the root conftest's): the shared kit factory on the migrated ``store`` (SQLite and
  PostgreSQL) with the token file of two principals (alice@acme, bob@acme) and, from
  ``kit_defaults`` here, ``page_size=3``.
* ``server``: ``create_app(kit)`` served by uvicorn in-process on 127.0.0.1:0; a :class:`Running`
  with ``url``, ``kit``, ``client(...)`` (an SDK client over httpx2) and ``raw(...)`` (plain httpx).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import jsonschema
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from adapter.bootstrap import Kit, build
from adapter.entrypoints.http.app import create_app
from adapter.store import Store
from tests.support.constants import ALICE_TOKEN, BOB_TOKEN, TIMEOUT
from tests.support.mcp import mcp_headers, modern_meta, parse_body
from tests.support.servers import serve_in_process


@pytest.fixture
def kit_defaults() -> dict[str, Any]:
    return {"page_size": 3}


@pytest.fixture
def fast_retries() -> bool:
    return False  # the commit flow's own retry waits: progress and cancellation as a client sees them


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
        capabilities: dict[str, Any] | None = None,
    ) -> tuple[httpx.Response, Any]:
        """One JSON-RPC request POSTed with plain httpx and the 2026-07-28 headers and ``_meta``.

        ``capabilities`` are the client capabilities the request declares (none by default).
        """
        declared = {"io.modelcontextprotocol/clientCapabilities": capabilities} if capabilities else {}
        body_params = {**(params or {}), "_meta": modern_meta(**declared)}
        all_headers = {**mcp_headers(method, name, token=token), **(headers or {})}
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
def serve_kit(kit: Kit, db_url: str) -> Any:
    """``async with serve_kit(**settings_changes) as running``: another server on the same database.

    Its own kit, engine and MCP server, as a second process (or a restart with other settings) has.
    """

    @contextlib.asynccontextmanager
    async def serve(**changes: Any) -> AsyncIterator[Running]:
        other = build(kit.settings.model_copy(update=changes), store=Store.from_url(db_url))
        try:
            async with serve_in_process(create_app(other)) as base_url:
                yield Running(base_url, other)
        finally:
            other.close()

    return serve


@pytest.fixture
async def other_server(serve_kit: Any) -> AsyncIterator[Running]:
    """A second server process's twin on the same database, with the same settings."""
    async with serve_kit() as running:
        yield running


@pytest.fixture
def make_records() -> Any:
    def make(n: int, tag: str = "r") -> list[dict[str, Any]]:
        return [{"id": i, "name": f"{tag} {i}"} for i in range(n)]

    return make
