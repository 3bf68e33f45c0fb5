"""The HTTP edge: Origin, bearer tokens, the handshake when not served, unknown methods, GET, health."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.mcp import LEGACY_INITIALIZE

pytestmark = pytest.mark.anyio


async def test_a_foreign_origin_is_refused_with_403_and_a_local_one_is_served(server: Any) -> None:
    evil, _ = await server.raw("tools/list", {}, headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403
    local, body = await server.raw("tools/list", {}, headers={"Origin": server.base_url})
    assert local.status_code == 200, local.text
    assert body["result"]["tools"]


@pytest.mark.parametrize("token", [None, "not-a-known-token-at-all"], ids=["missing", "unknown"])
async def test_a_missing_or_unknown_bearer_token_is_refused_with_401(server: Any, token: str | None) -> None:
    response, _ = await server.raw("tools/list", {}, token=token)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    known, _ = await server.raw("tools/list", {}, token=server.alice_token)
    assert known.status_code == 200


MODERN_ONLY = pytest.mark.parametrize("settings_overrides", [{"protocol_eras": "modern"}])


@MODERN_ONLY
async def test_a_legacy_initialize_gets_400_with_32022_naming_the_supported_version(server: Any) -> None:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {server.alice_token}",
    }
    async with httpx.AsyncClient() as http:
        response = await http.post(server.url, content=json.dumps(LEGACY_INITIALIZE), headers=headers)
    assert response.status_code == 400
    body = response.json()
    assert body["id"] == 7
    assert body["error"]["code"] == -32022
    assert body["error"]["data"]["supported"] == ["2026-07-28"]
    assert body["error"]["data"]["requested"] == "2025-11-25"


async def test_an_unknown_method_is_404_with_32601(server: Any) -> None:
    response, body = await server.raw("ping", {})
    assert response.status_code == 404, response.text
    assert body["error"]["code"] == -32601


@MODERN_ONLY
async def test_get_on_the_mcp_endpoint_is_405_and_healthz_is_200(server: Any) -> None:
    async with httpx.AsyncClient() as http:
        get = await http.get(
            server.url,
            headers={"Accept": "text/event-stream", "Authorization": f"Bearer {server.alice_token}"},
        )
        health = await http.get(server.base_url + "/healthz")
    assert get.status_code == 405
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}
