"""Request logs carry no secrets; local mode serves without tokens and states the handle lifetime."""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


async def test_one_log_line_per_request_without_token_handle_or_record_contents(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="adapter")
    caplog.set_level(logging.INFO)
    record_value = "record-value-" + secrets.token_hex(8)
    sent: list[tuple[Any, str]] = []

    async def count_request(request: Any) -> None:
        message = json.loads(request.content or b"{}")
        if "id" in message:  # requests only; notifications are not logged
            sent.append((message["id"], message["method"]))

    async with server.client(event_hooks={"request": [count_request]}) as client:
        handle = server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]
        await client.call_tool("add_record", {"handle": handle, "record": {"secret": record_value}})
        await client.call_tool("commit_import", {"handle": handle})
        await client.call_tool("get_import_status", {"handle": handle})
        await client.read_resource(f"import://{handle}")
        await client.call_tool("get_import_status", {"handle": "imp_" + "x" * 43})

    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "adapter.requests"]
    assert Counter(line["method"] for line in lines) == Counter(method for _, method in sent)
    assert len({line["request_id"] for line in lines}) == len(lines)
    for line in lines:
        assert {"request_id", "method", "tool", "outcome", "duration_ms", "handle"} <= line.keys()
        assert isinstance(line["duration_ms"], int | float) and line["duration_ms"] >= 0
    expected_hash = hashlib.sha256(handle.encode()).hexdigest()[:12]
    calls = [line for line in lines if line["method"] == "tools/call"]
    assert [(line["tool"], line["outcome"]) for line in calls] == [
        ("begin_import", "ok"),
        ("add_record", "ok"),
        ("commit_import", "ok"),
        ("get_import_status", "ok"),
        ("get_import_status", "error:handle_not_found"),
    ]
    assert [line["handle"] for line in calls[1:4]] == [expected_hash] * 3
    [read] = [line for line in lines if line["method"] == "resources/read"]
    assert read["handle"] == expected_hash

    text = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    for secret in (server.alice_token, handle, record_value):
        assert secret not in text


@pytest.mark.parametrize("settings_overrides", [{"tokens": None, "local_ttl_seconds": 777}])
async def test_local_mode_serves_without_a_token_and_states_the_handle_ttl(server: Any) -> None:
    async with server.client(token=None) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        before = datetime.now(UTC)
        begun = server.structured(await client.call_tool("begin_import", {"target": "customers"}))
    assert "777 seconds" in (tools["begin_import"].description or "")
    expires_in = (datetime.fromisoformat(begun["expires_at"]) - before).total_seconds()
    assert 770 <= expires_in <= 790
    response, _ = await server.raw("tools/list", {}, token=None)
    assert response.status_code == 200
