"""An identity provider that does not answer is not the caller's fault: 503 with ``Retry-After``
(never a 401, which would send clients to sign in again), on the MCP endpoint and the admin side."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.oauth.conftest import OAuthServer
from tests.support.constants import TIMEOUT
from tests.support.idp import Provider, claims_of, forge, needs_idp
from tests.support.servers import free_port

pytestmark = [pytest.mark.anyio, needs_idp]


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"oauth_issuer": f"http://127.0.0.1:{free_port()}"}  # nothing listens there


async def test_a_provider_that_does_not_answer_is_503(
    server: OAuthServer, idp: Provider, audience: str
) -> None:
    issuer = server.kit.settings.oauth_issuer
    token = forge({**claims_of(idp.token("agent", audience)), "iss": issuer}, key=idp.keys[0])
    response, _ = await server.call("begin_import", {"target": "customers"}, token=token)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "5"
    assert response.json()["error"] == "temporarily_unavailable"
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        admin = await http.get(
            server.base_url + "/admin/operations", headers={"Authorization": f"Bearer {token}"}
        )
    assert admin.status_code == 503 and admin.headers["retry-after"] == "5"
