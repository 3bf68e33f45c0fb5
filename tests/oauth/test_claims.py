"""The JWT checks one by one, on tokens signed with the provider's own key the way the provider
signs them, with claims no provider would be asked for (already expired, not yet valid, no
``exp``, another issuer): the server's leeway (``ADAPTER_OAUTH_LEEWAY_SECONDS``, 30 s by default)
forgives clock skew and nothing more."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.oauth.conftest import OAuthServer
from tests.support.idp import Provider, claims_of, forge, needs_idp

pytestmark = [pytest.mark.anyio, needs_idp]


async def status_of(server: OAuthServer, token: str) -> tuple[int, str]:
    response, _ = await server.call("begin_import", {"target": "customers"}, token=token)
    return response.status_code, response.headers.get("www-authenticate", "")


async def test_each_claim_check(server: OAuthServer, idp: Provider, audience: str) -> None:
    real = claims_of(idp.token("agent", audience))
    now = int(time.time())
    key = idp.keys[0]  # the provider's signing key: these tokens differ from its own only in claims

    def signed(**changes: Any) -> str:
        claims = {**real, **changes}
        return forge({k: v for k, v in claims.items() if v is not None}, key=key)

    cases: list[tuple[str, str, int, str]] = [
        ("as the provider issued it", signed(), 200, ""),
        ("expired 10 s ago: within the leeway", signed(exp=now - 10), 200, ""),
        ("expired 60 s ago", signed(exp=now - 60), 401, "the token has expired"),
        ("valid only in 60 s", signed(nbf=now + 60), 401, "the token is not valid yet"),
        ("valid in 10 s: within the leeway", signed(nbf=now + 10), 200, ""),
        ("no exp", signed(exp=None), 401, "the token has no exp claim"),
        ("another issuer", signed(iss="https://evil.example.com"), 401, "issued by another issuer"),
        ("no aud", signed(aud=None), 401, "the token has no aud claim"),
        ("this server among several audiences", signed(aud=["https://a.example", audience]), 200, ""),
        ("another audience only", signed(aud=["https://a.example"]), 401, "issued for another resource"),
        ("a sub too long for a principal", signed(sub="x" * 201), 401, "no usable 'sub' claim"),
        ("a tenant that is not text", signed(tenant=True), 401, "names no tenant"),
    ]
    for what, token, status, reason in cases:
        got, header = await status_of(server, token)
        assert got == status, (what, got, header)
        assert reason in header, (what, header)
