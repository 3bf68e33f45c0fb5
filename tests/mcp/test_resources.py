"""Resources: paginated listing with signed cursors, reading an import, and cache hints on the wire."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio


async def begin(server: Any, client: Any, target: str = "customers") -> str:
    result = await client.call_tool("begin_import", {"target": target})
    return server.structured(result)["handle"]


def handles_of(page: Any) -> list[str]:
    return [resource.uri.removeprefix("import://") for resource in page.resources]


async def test_pages_are_newest_first_without_duplicates_or_gaps_while_imports_are_created(
    server: Any,
) -> None:
    async with server.client() as client:
        created = [await begin(server, client, f"t{i}") for i in range(8)]
        seen: list[str] = []
        pages: list[list[str]] = []
        cursor = None
        for _ in range(5):
            page = await client.list_resources(cursor=cursor)
            pages.append(handles_of(page))
            seen.extend(pages[-1])
            cursor = page.next_cursor
            if cursor is None:
                break
            await begin(server, client, "created-between-pages")
    assert [len(page) for page in pages] == [3, 3, 2]
    assert seen == list(reversed(created)), "newest first, each import exactly once"


async def test_a_cursor_works_only_for_its_principal_and_only_untampered(server: Any) -> None:
    async with server.client() as alice:
        for i in range(4):
            await begin(server, alice, f"t{i}")
        cursor = (await alice.list_resources()).next_cursor
        assert cursor
        second = await alice.list_resources(cursor=cursor)
        assert len(second.resources) == 1
        body, _, mac = cursor.rpartition(".")
        tampered = body[:-1] + ("A" if body[-1] != "A" else "B") + "." + mac
        with pytest.raises(MCPError) as bad:
            await alice.list_resources(cursor=tampered)
        assert (bad.value.code, bad.value.message) == (-32602, "Invalid cursor")
    async with server.client(server.bob_token) as bob:
        with pytest.raises(MCPError) as foreign:
            await bob.list_resources(cursor=cursor)
        assert (foreign.value.code, foreign.value.message) == (-32602, "Invalid cursor")


async def test_reading_an_import_returns_its_json_state(server: Any) -> None:
    async with server.client() as client:
        handle = await begin(server, client, "orders")
        await client.call_tool("add_records", {"handle": handle, "records": [{"a": 1}, {"a": 2}]})
        result = await client.read_resource(f"import://{handle}")
    [content] = result.contents
    assert content.mime_type == "application/json"
    state = json.loads(content.text)
    assert (state["handle"], state["status"], state["target"], state["record_count"]) == (
        handle,
        "open",
        "orders",
        2,
    )


async def test_cache_hints_are_on_the_wire_private_for_imports_and_public_for_tools(server: Any) -> None:
    async with server.client() as client:
        handle = await begin(server, client)
    response, listed = await server.raw("resources/list", {})
    assert response.status_code == 200, response.text
    assert isinstance(listed["result"]["ttlMs"], int)
    assert listed["result"]["cacheScope"] == "private"
    assert [r["uri"] for r in listed["result"]["resources"]] == [f"import://{handle}"]

    uri = f"import://{handle}"
    response, read = await server.raw("resources/read", {"uri": uri}, name=uri)
    assert response.status_code == 200, response.text
    assert isinstance(read["result"]["ttlMs"], int)
    assert read["result"]["cacheScope"] == "private"

    response, tools = await server.raw("tools/list", {})
    assert response.status_code == 200, response.text
    assert tools["result"]["ttlMs"] > 0
    assert tools["result"]["cacheScope"] == "public"
