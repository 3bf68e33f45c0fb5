"""What a client learns before it has a token: the protected-resource metadata (RFC 9728) and the
401 that points to it, naming the scope the request needs."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.oauth.conftest import OAuthServer
from tests.support.constants import TIMEOUT
from tests.support.idp import ABORT, COMMIT, READ, WRITE, Provider, needs_idp

pytestmark = [pytest.mark.anyio, needs_idp]

METADATA = "/.well-known/oauth-protected-resource"


async def test_the_metadata_names_the_issuer_the_scopes_and_the_bearer_method_at_both_paths(
    server: OAuthServer, idp: Provider, audience: str
) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        suffixed = await http.get(server.base_url + METADATA + "/mcp")
        root = await http.get(server.base_url + METADATA, headers={"Origin": "https://inspector.example"})
    assert suffixed.status_code == 200 and root.status_code == 200, (suffixed.text, root.text)
    document = suffixed.json()
    assert document == root.json()
    assert document["resource"] == audience
    assert document["authorization_servers"] == [idp.issuer]  # exactly as the issuer writes itself
    assert document["scopes_supported"] == [READ, WRITE, COMMIT, ABORT]
    assert document["bearer_methods_supported"] == ["header"]
    # a browser-based client on another origin may read it (CORS), though it may not call /mcp
    assert root.headers["access-control-allow-origin"] == "*"


def _challenge(response: httpx.Response) -> dict[str, str]:
    header = response.headers["www-authenticate"]
    assert header.startswith("Bearer ")
    params: dict[str, str] = {}
    for part in header[len("Bearer ") :].split('", '):
        key, _, value = part.partition("=")
        params[key.strip()] = value.strip().strip('"')
    return params


@pytest.mark.parametrize(
    ("method", "params", "name", "scope"),
    [
        ("server/discover", {}, None, READ),  # needs no scope itself: asks for the least, reading
        (
            "tools/call",
            {"name": "get_import_status", "arguments": {"handle": "imp_x"}},
            "get_import_status",
            READ,
        ),
        ("tools/call", {"name": "begin_import", "arguments": {"target": "t"}}, "begin_import", WRITE),
        ("tools/call", {"name": "commit_import", "arguments": {"handle": "imp_x"}}, "commit_import", COMMIT),
        ("tools/call", {"name": "abort_import", "arguments": {"handle": "imp_x"}}, "abort_import", ABORT),
        ("resources/list", {}, None, READ),
    ],
)
async def test_no_token_is_401_naming_the_metadata_and_the_scope_the_request_needs(
    server: OAuthServer, method: str, params: dict[str, Any], name: str | None, scope: str
) -> None:
    response, _ = await server.raw(method, params, token=None, name=name)
    assert response.status_code == 401
    challenge = _challenge(response)
    assert challenge == {
        "resource_metadata": server.base_url + METADATA + "/mcp",
        "scope": scope,
    }, "no error code when no token was sent (RFC 6750 3.1)"


async def test_a_2025_era_client_without_a_token_gets_the_same_401(server: OAuthServer) -> None:
    response, _ = await server.legacy_call("begin_import", {"target": "t"}, token=None)
    assert response.status_code == 401
    assert _challenge(response)["resource_metadata"] == server.base_url + METADATA + "/mcp"


async def test_a_token_in_the_query_string_is_not_a_token(
    server: OAuthServer, idp: Provider, audience: str
) -> None:
    token = idp.token("agent", audience)
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        response = await http.post(
            server.url + "?access_token=" + token,
            json={"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
            headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
        )
    assert response.status_code == 401


async def test_only_the_mcp_endpoint_asks_for_a_token(server: OAuthServer) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        assert (await http.get(server.base_url + "/no-such-page")).status_code == 404
        assert (await http.get(server.base_url + "/healthz")).status_code == 200
        assert (await http.post(server.base_url + "/mcp/", json={})).status_code == 401
