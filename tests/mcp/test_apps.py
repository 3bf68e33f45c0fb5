"""MCP Apps (``io.modelcontextprotocol/ui``) on the wire: the review view and its reads.

Over real HTTP against the real server (both eras): the extension is advertised while
``ADAPTER_APPS_VIEW`` is on; a request that declared it (with the ``text/html;profile=mcp-app``
MIME type) sees ``_meta.ui.resourceUri`` on ``commit_import`` and ``get_import_status`` and can read
the ``ui://`` view and an import's review; every other request sees exactly what a server without
the view shows. The browser test (``test_apps_view.py``) drives the view itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client

from adapter.entrypoints.mcp.observability import hash_handle
from tests.support.constants import ALICE_TOKEN, TIMEOUT

pytestmark = pytest.mark.anyio

UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
DECLARED = {"extensions": {UI: {"mimeTypes": [MIME]}}}
VIEW = "ui://legacy-import-adapter/import-review"
VIEW_TOOLS = {"commit_import", "get_import_status"}


async def _tools(server: Any, capabilities: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    _, body = await server.raw("tools/list", capabilities=capabilities)
    return list(body["result"]["tools"])


async def _read(server: Any, uri: str, *, capabilities: Any = DECLARED, token: str = ALICE_TOKEN) -> Any:
    params = {"uri": uri}
    _, body = await server.raw("resources/read", params, name=uri, capabilities=capabilities, token=token)
    return body


@asynccontextmanager
async def _legacy_client(server: Any, *, declare: bool) -> AsyncIterator[Client]:
    """A 2025-11-25 session (initialize) whose client declares the extension, or not."""
    extensions = [advertise(UI, {"mimeTypes": [MIME]})] if declare else None
    async with httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {ALICE_TOKEN}"}, timeout=TIMEOUT
    ) as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, cache=None, mode="legacy", extensions=extensions) as client:
            yield client


async def test_the_extension_is_advertised_where_the_protocol_can_say_it(server: Any) -> None:
    """2026-07-28: in ``server/discover``. The 2025-11-25 schema has no ``extensions`` capability
    and the SDK writes that era's ``initialize`` result by it: no advertisement there (if the SDK
    starts sending one, this fails and docs/state-matrix.md says otherwise). A 2025 host that
    declared the extension gets the view all the same (below)."""
    _, discovered = await server.raw("server/discover")
    async with _legacy_client(server, declare=True) as client:
        capabilities = client.session.server_capabilities

    assert discovered["result"]["capabilities"]["extensions"][UI] == {}
    assert capabilities is not None and capabilities.extensions is None


async def test_only_a_request_that_declared_apps_sees_the_view_on_the_tools(
    server: Any, serve_kit: Any
) -> None:
    declared = await _tools(server, DECLARED)
    plain = await _tools(server)
    without_mime = await _tools(server, {"extensions": {UI: {}}})
    async with serve_kit(apps_view=False) as off:
        no_view = await _tools(off)
        no_view_declared = await _tools(off, DECLARED)

    marked = {tool["name"]: tool["_meta"]["ui"] for tool in declared if "_meta" in tool}
    assert marked == {name: {"resourceUri": VIEW} for name in VIEW_TOOLS}
    assert plain == without_mime == no_view == no_view_declared  # exactly what a server without it lists
    assert [t for t in declared if t["name"] not in VIEW_TOOLS] == [
        t for t in plain if t["name"] not in VIEW_TOOLS
    ]


async def test_the_view_is_one_document_allowing_only_its_own_style_and_script(server: Any) -> None:
    body = await _read(server, VIEW)
    [content] = body["result"]["contents"]
    html = content["text"]

    assert content["mimeType"] == MIME
    assert content["_meta"] == {"ui": {"csp": {}, "prefersBorder": True}}  # no domain declared at all
    assert body["result"]["cacheScope"] == "public"
    [policy] = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    rules = dict(rule.strip().split(" ", 1) for rule in policy.split(";"))
    [style] = re.findall(r"<style>(.*?)</style>", html, re.DOTALL)
    scripts = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    assert len(scripts) == 1  # besides it only the JSON data block, which never runs
    assert rules["script-src"] == _hash(scripts[0]) and rules["style-src"] == _hash(style)
    assert rules["default-src"] == rules["connect-src"] == rules["font-src"] == "'none'"
    assert rules["frame-src"] == rules["object-src"] == rules["base-uri"] == rules["form-action"] == "'none'"
    assert rules["img-src"] == "data:"
    assert re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html) is None
    assert "@import" not in style and "url(" not in style and "@font-face" not in style
    assert '"get_operation_status": "get_operation_status"' in html  # the tool names in force


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


async def test_the_review_is_the_callers_own_import_a_page_at_a_time(server: Any, make_records: Any) -> None:
    async with server.client() as client:
        handle = await server.stage(client, make_records(25))
    first = (await _read(server, f"import://{handle}/review?after=0&size=10"))["result"]
    review = json.loads(first["contents"][0]["text"])
    second = await _read(server, f"import://{handle}/review?after={review['page']['next_after']}&size=10")
    foreign = await _read(server, f"import://{handle}/review", token=server.bob_token)

    assert first["contents"][0]["mimeType"] == "application/json" and first["cacheScope"] == "private"
    assert (review["status"], review["target"], review["record_count"]) == ("open", "customers", 25)
    assert [r["seq"] for r in review["page"]["records"]] == list(range(1, 11))
    assert review["page"]["records"][0]["record"] == {"id": 0, "name": "r 0"}
    assert review["missing"] == [{"field": "id", "missing": 0}, {"field": "name", "missing": 0}]
    assert review["question"]["purpose"] == "commit" and review["question"]["record_count"] == 25
    assert review["question"]["text"].startswith("Commit 25 staged records into the legacy target")
    assert (
        review["question"]["content_digest"] == review["content_digest"]
        and len(review["content_digest"]) == 64
    )
    assert review["commit"] is None
    texts = json.loads(second["result"]["contents"][0]["text"])
    assert [r["seq"] for r in texts["page"]["records"]] == list(range(11, 21))
    assert foreign["error"]["code"] == -32602 and foreign["error"]["message"] == "Resource not found"


@pytest.mark.parametrize(
    "query",
    ["?size=101", "?after=-1", "?after=x", "?after=1&after=2", "?page=2", "#top"],
)
async def test_a_review_address_out_of_bounds_is_refused(server: Any, query: str) -> None:
    async with server.client() as client:
        handle = await server.stage(client, [{"a": 1}])
    refused = await _read(server, f"import://{handle}/review{query}")

    assert refused["error"]["code"] == -32602


async def test_without_the_extension_neither_the_view_nor_a_review_is_found(
    server: Any, serve_kit: Any, make_records: Any
) -> None:
    async with server.client() as client:
        handle = await server.stage(client, make_records(2))
    review = f"import://{handle}/review"
    undeclared = [await _read(server, uri, capabilities=None) for uri in (VIEW, review)]
    async with serve_kit(apps_view=False) as off:
        _, discovered = await off.raw("server/discover")
        disabled = [await _read(off, uri) for uri in (VIEW, review)]

    for body in undeclared + disabled:
        assert body["error"]["code"] == -32602 and body["error"]["message"] == "Resource not found"
    assert UI not in (discovered["result"]["capabilities"].get("extensions") or {})


async def test_the_tools_answer_the_same_with_or_without_the_extension(
    server: Any, make_records: Any
) -> None:
    async with server.client() as client:
        handle = await server.stage(client, make_records(2))
    call = {"name": "get_import_status", "arguments": {"handle": handle}}
    _, declared = await server.raw("tools/call", call, name="get_import_status", capabilities=DECLARED)
    _, plain = await server.raw("tools/call", call, name="get_import_status")

    assert declared["result"] == plain["result"]


async def test_a_2025_session_that_declared_apps_gets_the_view_and_the_review(
    server: Any, make_records: Any
) -> None:
    async with server.client() as client:
        handle = await server.stage(client, make_records(3))
    async with _legacy_client(server, declare=True) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        view = await client.read_resource(VIEW)
        review = await client.read_resource(f"import://{handle}/review")
    async with _legacy_client(server, declare=False) as client:
        plain = {t.name: t for t in (await client.list_tools()).tools}

    assert (tools["commit_import"].meta or {})["ui"] == {"resourceUri": VIEW}
    assert view.contents[0].mime_type == MIME
    assert '"record_count": 3' in review.contents[0].text  # type: ignore[union-attr]
    assert all(tool.meta is None or "ui" not in tool.meta for tool in plain.values())


@pytest.mark.parametrize("settings_overrides", [{"tool_prefix": "erp_", "server_name": "erp-adapter"}])
async def test_a_tool_prefix_and_a_server_name_follow_into_the_view(server: Any) -> None:
    tools = await _tools(server, DECLARED)
    view = "ui://erp-adapter/import-review"
    body = await _read(server, view)

    assert {t["name"] for t in tools if "_meta" in t} == {"erp_commit_import", "erp_get_import_status"}
    assert all(t["_meta"]["ui"]["resourceUri"] == view for t in tools if "_meta" in t)
    assert '"commit_import": "erp_commit_import"' in body["result"]["contents"][0]["text"]


async def test_a_review_read_is_logged_with_its_handles_hash_and_no_record_content(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with server.client() as client:
        handle = await server.stage(client, [{"name": "Ada Lovelace"}])
    caplog.set_level(logging.INFO, logger="adapter")
    await _read(server, f"import://{handle}/review?after=0&size=5")

    [line] = [
        json.loads(r.getMessage())
        for r in caplog.records
        if r.name == "adapter.requests" and json.loads(r.getMessage()).get("method") == "resources/read"
    ]
    assert line["handle"] == hash_handle(handle) and line["outcome"] == "ok"
    assert handle not in caplog.text and "Ada Lovelace" not in caplog.text
