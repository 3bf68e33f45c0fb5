"""Limits over real HTTP: body size before authentication, Host and Origin on every route (before
authentication, but on /mcp after the SDK's token check), no third-party scripts on the API pages,
the dashboard's own allowed origins."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.mcp import mcp_headers, modern_meta

MB = 1024 * 1024


def _chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        sent += size
        yield b"x" * size


# --- body size -------------------------------------------------------------------------------------


def test_an_oversized_admin_body_is_413_before_authentication(server: Any) -> None:
    # No token at all: today this body would be read whole before the 401.
    response = server.http.post(
        server.url + "/admin/operations/op_x/reconcile",
        content=b"{" + b" " * (200 * 1024) + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413


def test_a_streamed_admin_body_is_counted_and_refused(server: Any) -> None:
    response = server.http.post(
        server.url + "/admin/ui/login",
        content=_chunks(2 * MB),  # chunked: no Content-Length to trust
        headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": server.url},
    )
    assert response.status_code == 413


def test_a_small_admin_body_still_reaches_authentication(server: Any) -> None:
    response = server.http.post(server.url + "/admin/operations/op_x/reconcile", json={"reason": "r"})
    assert response.status_code == 401


@pytest.mark.parametrize("settings_overrides", [{"admin_token": None, "admin_readonly_token": None}])
def test_the_limit_holds_with_admin_disabled(server: Any) -> None:
    response = server.http.post(server.url + "/admin/operations/op_x/reconcile", content=_chunks(4 * MB))
    assert response.status_code == 413


@pytest.mark.parametrize("settings_overrides", [{"max_body_bytes": 64 * 1024}])
def test_the_mcp_endpoint_has_the_app_wide_limit(server: Any) -> None:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
    }
    declared = server.http.post(server.url + "/mcp", content=b"x" * (128 * 1024), headers=headers)
    assert declared.status_code == 413  # before authentication
    # Unauthenticated and streamed: refused by the token check without reading the body.
    assert server.http.post(server.url + "/mcp", content=_chunks(MB), headers=headers).status_code == 401
    # Authenticated and streamed: counted while the server reads it, refused past the limit.
    authed = {**headers, "Authorization": f"Bearer {server.mcp_token}"}
    assert server.http.post(server.url + "/mcp", content=_chunks(MB), headers=authed).status_code == 413
    # Below the limit the call goes through as before.
    assert server.tool("begin_import", {"target": "customers"})["structuredContent"]["status"] == "open"


# --- Host and Origin -------------------------------------------------------------------------------

ROUTES = ["/metrics", "/readyz", "/openapi.json", "/admin/operations", "/admin/ui/login"]


@pytest.mark.parametrize("path", ROUTES)
def test_a_foreign_host_is_refused_on_every_route(server: Any, path: str) -> None:
    # A DNS-rebinding page: the browser sends the attacker's name as Host.
    response = server.http.get(server.url + path, headers={"Host": "rebind.example:80"})
    assert response.status_code == 421


@pytest.mark.parametrize("path", ROUTES)
def test_a_foreign_origin_is_refused_on_every_route(server: Any, path: str) -> None:
    response = server.http.get(server.url + path, headers={"Origin": "http://evil.example"})
    assert response.status_code == 403


def test_own_origin_and_no_origin_pass(server: Any) -> None:
    assert server.http.get(server.url + "/readyz", headers={"Origin": server.url}).status_code == 200
    assert server.http.get(server.url + "/readyz").status_code == 200
    assert server.http.get(server.url + "/healthz", headers={"Host": "probe.internal"}).status_code == 200


@pytest.mark.parametrize("settings_overrides", [{"allowed_hosts": ["adapter.example:*"]}])
def test_configured_hosts_are_accepted(server: Any) -> None:
    response = server.http.get(server.url + "/readyz", headers={"Host": "adapter.example:443"})
    assert response.status_code == 200


def test_mcp_checks_the_token_first_then_host_and_origin(server: Any) -> None:
    # /mcp is left to the SDK: its auth middleware wraps the transport, which checks Host and
    # Origin with the same allowlists (docs/architecture.md, "The path of one commit").
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}
    for header in ({"Host": "rebind.example:80"}, {"Origin": "http://evil.example"}):
        anonymous = {**mcp_headers("tools/list"), **header}
        assert server.http.post(server.url + "/mcp", json=message, headers=anonymous).status_code == 401
    authed = mcp_headers("tools/list", token=server.mcp_token)
    foreign_host = server.http.post(
        server.url + "/mcp", json=message, headers={**authed, "Host": "rebind.example:80"}
    )
    assert foreign_host.status_code == 421
    foreign_origin = server.http.post(
        server.url + "/mcp", json=message, headers={**authed, "Origin": "http://evil.example"}
    )
    assert foreign_origin.status_code == 403
    assert server.http.post(server.url + "/mcp", json=message, headers=authed).status_code == 200


# --- API pages -------------------------------------------------------------------------------------


def test_docs_pages_are_off_by_default(server: Any) -> None:
    assert server.http.get(server.url + "/docs").status_code == 404
    assert server.http.get(server.url + "/redoc").status_code == 404
    assert server.http.get(server.url + "/openapi.json").status_code == 200


@pytest.mark.parametrize("settings_overrides", [{"api_docs": True}])
def test_docs_pages_can_be_turned_on(server: Any) -> None:
    assert server.http.get(server.url + "/docs").status_code == 200


# --- the dashboard's own origins -------------------------------------------------------------------

OTHER_PORT = "http://127.0.0.1:5999"


@pytest.mark.parametrize("settings_overrides", [{"allowed_origins": [OTHER_PORT]}])
def test_mcp_origins_are_not_trusted_by_the_dashboard(server: Any) -> None:
    form = {"token": server.operator_token, "next": "/admin/ui"}
    foreign = server.http.post(server.url + "/admin/ui/login", data=form, headers={"Origin": OTHER_PORT})
    assert foreign.status_code == 403
    assert "adapter_admin" not in foreign.cookies
    own = server.http.post(server.url + "/admin/ui/login", data=form, headers={"Origin": server.url})
    assert own.status_code == 303


@pytest.mark.parametrize("settings_overrides", [{"dashboard_allowed_origins": [OTHER_PORT]}])
def test_dashboard_origins_are_configured_on_their_own(server: Any) -> None:
    form = {"token": server.operator_token, "next": "/admin/ui"}
    response = server.http.post(server.url + "/admin/ui/login", data=form, headers={"Origin": OTHER_PORT})
    assert response.status_code == 303
