"""RFC 7662 introspection (``ADAPTER_OAUTH_INTROSPECTION_URL``) for opaque tokens: the server asks
the provider about every token with its own client credentials, so a revoked token stops at once."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from adapter.services.admin.reads import ImportFilter
from tests.oauth.conftest import OAuthServer
from tests.support.idp import OTHER_RESOURCE, SECRET, Provider, needs_idp

pytestmark = [pytest.mark.anyio, needs_idp]


@pytest.fixture
def settings_overrides(idp: Provider) -> dict[str, Any]:
    return {
        "oauth_introspection_url": idp.issuer + "/token/introspection",
        "oauth_client_id": "introspector",
        "oauth_client_secret": SECRET,
        "oauth_principal_claim": "client_id",  # a machine's introspected token names no sub
    }


async def test_an_opaque_token_is_introspected_and_binds_its_principal(
    server: OAuthServer, idp: Provider, audience: str, legacy_engine: Any
) -> None:
    token = idp.token("opaque", audience)
    assert token.count(".") == 0, "an opaque token, not a JWT"
    _, begun = await server.call("begin_import", {"target": "customers"}, token=token)
    handle = begun["result"]["structuredContent"]["handle"]
    await server.call("add_records", {"handle": handle, "records": [{"id": 1}]}, token=token)
    _, committed = await server.call("commit_import", {"handle": handle}, token=token)
    assert committed["result"]["structuredContent"]["status"] == "committed", committed
    [stored] = server.kit.admin.list_imports(ImportFilter()).items
    assert (stored.principal, stored.tenant) == ("opaque", "acme")
    assert len(legacy_engine.committed_batches()) == 1


async def test_a_revoked_token_is_refused_at_once(server: OAuthServer, idp: Provider, audience: str) -> None:
    token = idp.token("opaque", audience)
    response, _ = await server.call("begin_import", {"target": "customers"}, token=token)
    assert response.status_code == 200
    revoked = httpx.post(f"{idp.issuer}/token/revocation", data={"token": token}, auth=("opaque", SECRET))
    assert revoked.status_code == 200
    response, _ = await server.call("begin_import", {"target": "customers"}, token=token)
    assert response.status_code == 401
    assert (
        'error="invalid_token", error_description="the token is not active"'
        in response.headers["www-authenticate"]
    )
    assert len(server.kit.admin.list_imports(ImportFilter()).items) == 1


async def test_an_introspected_token_for_another_resource_is_refused(
    server: OAuthServer, idp: Provider
) -> None:
    token = idp.token("opaque", OTHER_RESOURCE)
    response, _ = await server.call("begin_import", {"target": "customers"}, token=token)
    assert response.status_code == 401
    assert "issued for another resource" in response.headers["www-authenticate"]
    assert server.kit.admin.list_imports(ImportFilter()).items == []
