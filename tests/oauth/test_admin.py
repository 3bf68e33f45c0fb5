"""The admin API, the dashboard and ``/metrics`` through the same identity provider: an operator or
viewer role from the token's scopes (``adapter:operator`` / ``adapter:viewer``), beside the admin
tokens; actions audited with the token's subject."""

from __future__ import annotations

import httpx
import pytest

from tests.oauth.conftest import OAuthServer
from tests.support.constants import TIMEOUT
from tests.support.idp import OTHER_RESOURCE, Provider, needs_idp

pytestmark = [pytest.mark.anyio, needs_idp]


async def get(server: OAuthServer, path: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        return await http.get(server.base_url + path, headers=headers)


async def post(server: OAuthServer, path: str, token: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        return await http.post(server.base_url + path, headers={"Authorization": f"Bearer {token}"}, json={})


async def committed_operation(server: OAuthServer, idp: Provider, audience: str) -> str:
    agent = idp.token("agent", audience)
    _, begun = await server.call("begin_import", {"target": "customers"}, token=agent)
    handle = begun["result"]["structuredContent"]["handle"]
    await server.call("add_records", {"handle": handle, "records": [{"id": 1}]}, token=agent)
    _, committed = await server.call("commit_import", {"handle": handle}, token=agent)
    return str(committed["result"]["structuredContent"]["operation_id"])


async def test_an_operator_token_reads_and_acts_and_the_audit_names_its_subject(
    server: OAuthServer, idp: Provider, audience: str
) -> None:
    operation = await committed_operation(server, idp, audience)
    operator = idp.token("operator", audience, scope="adapter:operator")
    listed = await get(server, "/admin/operations?kind=commit", operator)
    assert listed.status_code == 200, listed.text
    assert [item["operation_id"] for item in listed.json()["items"]] == [operation]
    acted = await post(server, f"/admin/operations/{operation}/reconcile", operator)
    assert acted.status_code == 200, acted.text
    detail = (await get(server, f"/admin/operations/{operation}", operator)).json()
    assert [(a["action"], a["actor"]) for a in detail["audit"]] == [("reconcile", "operator:operator")]
    page = await get(server, "/admin/ui", operator)  # the dashboard takes the bearer token too
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert (await get(server, "/metrics", operator)).status_code == 200


async def test_a_viewer_token_may_look_but_not_act(server: OAuthServer, idp: Provider, audience: str) -> None:
    operation = await committed_operation(server, idp, audience)
    viewer = idp.token("viewer", audience, scope="adapter:viewer")
    assert (await get(server, f"/admin/operations/{operation}", viewer)).status_code == 200
    refused = await post(server, f"/admin/operations/{operation}/reconcile", viewer)
    assert refused.status_code == 403
    detail = (await get(server, f"/admin/operations/{operation}", viewer)).json()
    assert detail["audit"] == []


async def test_tokens_without_a_role_or_for_another_resource_get_nothing(
    server: OAuthServer, idp: Provider, audience: str
) -> None:
    agent = idp.token("agent", audience)  # every MCP scope, no admin role
    elsewhere = idp.token("operator", OTHER_RESOURCE, scope="adapter:operator")  # the role, elsewhere
    for token in (None, agent, elsewhere, "not-a-token-at-all-" + "x" * 20):
        response = await get(server, "/admin/operations", token)
        assert response.status_code == 401, (token, response.text)
    page = await get(server, "/admin/ui", agent)
    assert page.status_code == 303 and page.headers["location"].startswith("/admin/ui/login")
