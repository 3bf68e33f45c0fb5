"""Every token the server must refuse, with the status and ``WWW-Authenticate`` the spec names, and
proof that nothing was staged or committed: the real provider's tokens where a provider issues such
a token (expired, another audience, no tenant, too few scopes, another principal), forged ones from
a real token's claims where no provider would (another key, ``alg: none``, an HMAC over the public key).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import jwt
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, InputRequiredResult

from adapter.services.admin.reads import ImportFilter
from tests.oauth.conftest import OAuthServer
from tests.support.idp import (
    COMMIT,
    OTHER_RESOURCE,
    READ,
    WRITE,
    Provider,
    SigningKey,
    claims_of,
    forge,
    needs_idp,
    public_pem,
)
from tests.support.wait import wait_until_async

pytestmark = [pytest.mark.anyio, needs_idp]

RECORDS = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {
        "oauth_leeway_seconds": 0
    }  # an expired token is expired at once (the default allows 30 s of skew)


def challenge(response: httpx.Response) -> str:
    return response.headers.get("www-authenticate", "")


async def staged(server: OAuthServer, token: str) -> str:
    response, body = await server.call("begin_import", {"target": "customers"}, token=token)
    assert response.status_code == 200, response.text
    handle = body["result"]["structuredContent"]["handle"]
    response, body = await server.call("add_records", {"handle": handle, "records": RECORDS}, token=token)
    assert body["result"]["structuredContent"]["record_count"] == 2, body
    return str(handle)


async def assert_untouched(server: OAuthServer, handle: str, token: str, legacy_engine: Any) -> None:
    """The import is as staged (two records, open), no other import exists, nothing was committed."""
    _, body = await server.call("get_import_status", {"handle": handle}, token=token)
    status = body["result"]["structuredContent"]
    assert (status["status"], status["record_count"]) == ("open", 2), status
    assert [op["kind"] for op in status["operations"]] == ["begin", "add"]
    assert len(server.kit.admin.list_imports(ImportFilter()).items) == 1
    assert legacy_engine.committed_batches() == []


def refused_tokens(idp: Provider, audience: str) -> dict[str, tuple[str, str]]:
    """name -> (token, what error_description says)."""
    real = idp.token("agent", audience)
    claims = claims_of(real)
    kid = jwt.get_unverified_header(real)["kid"]
    hmac_token = forge(claims, alg="HS256", kid=kid, secret=public_pem(idp.keys[0]))
    return {
        "another key, the provider's kid": (
            forge(claims, key=SigningKey.new(), kid=kid),
            "signature does not verify",
        ),
        "another key, its own kid": (forge(claims, key=SigningKey.new()), "key"),
        "alg none": (forge(claims, alg="none", kid=kid), "algorithm is not allowed"),
        "HS256 keyed with the public key": (hmac_token, "algorithm is not allowed"),
        "another audience": (idp.token("agent", OTHER_RESOURCE), "issued for another resource"),
        "no tenant": (idp.token("no-tenant", audience), "names no tenant"),
        "not a JWT": ("opaque-looking-token-" + "x" * 20, "not a JWT"),
    }


async def test_no_token_is_401_and_nothing_happens(
    server: OAuthServer, idp: Provider, audience: str, legacy_engine: Any
) -> None:
    alice = idp.token("agent", audience)
    handle = await staged(server, alice)
    for tool, arguments, scope in [
        ("begin_import", {"target": "customers"}, WRITE),
        ("add_records", {"handle": handle, "records": RECORDS}, WRITE),
        ("commit_import", {"handle": handle}, COMMIT),
    ]:
        response, _ = await server.call(tool, arguments, token=None)
        assert response.status_code == 401
        assert challenge(response) == (
            f'Bearer resource_metadata="{server.base_url}/.well-known/oauth-protected-resource/mcp", '
            f'scope="{scope}"'
        )
    await assert_untouched(server, handle, alice, legacy_engine)


async def test_each_refused_token_is_401_invalid_token_and_nothing_happens(
    server: OAuthServer, idp: Provider, audience: str, legacy_engine: Any
) -> None:
    alice = idp.token("agent", audience)
    handle = await staged(server, alice)
    for what, (token, reason) in refused_tokens(idp, audience).items():
        for tool, arguments in [
            ("begin_import", {"target": "customers"}),
            ("add_records", {"handle": handle, "records": RECORDS}),
            ("commit_import", {"handle": handle}),
        ]:
            response, _ = await server.call(tool, arguments, token=token)
            assert response.status_code == 401, (what, tool, response.text)
            header = challenge(response)
            assert header.startswith('Bearer error="invalid_token"'), (what, header)
            assert reason in header, (what, header)
            assert f'resource_metadata="{server.base_url}/.well-known/oauth-protected-resource/mcp"' in header
    await assert_untouched(server, handle, alice, legacy_engine)


async def test_an_expired_token_is_401_and_nothing_happens(
    server: OAuthServer, idp: Provider, audience: str, legacy_engine: Any
) -> None:
    alice = idp.token("agent", audience)
    handle = await staged(server, alice)
    short = idp.token("short-lived", audience)  # a three-second token from the provider
    exp = claims_of(short)["exp"]
    response, _ = await server.call("get_import_status", {"handle": handle}, token=short)
    assert response.status_code == 200, "good while it lasts (and remembered as checked)"
    await wait_until_async(lambda: time.time() > exp + 0.5, timeout=5, what="the token's expiry")
    response, _ = await server.call("commit_import", {"handle": handle}, token=short)
    assert response.status_code == 401
    assert 'error="invalid_token", error_description="the token has expired"' in challenge(response)
    await assert_untouched(server, handle, alice, legacy_engine)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_a_token_without_the_commit_scope_gets_403_naming_it_and_nothing_commits(
    server: OAuthServer, idp: Provider, audience: str, legacy_engine: Any, era: str
) -> None:
    alice = idp.token("agent", audience)
    handle = await staged(server, alice)
    stager = idp.token("stager", audience, scope=f"{READ} {WRITE}")  # the same tenant, may stage only
    call = server.call if era == "2026-07-28" else server.legacy_call
    response, _ = await call("commit_import", {"handle": handle}, token=stager)
    assert response.status_code == 403, response.text
    header = challenge(response)
    assert header.startswith('Bearer error="insufficient_scope"'), header
    # the scope to ask for: the one missing, with those already granted (a client that replaces its
    # scopes on a step-up keeps what it had)
    assert f'scope="{READ} {WRITE} {COMMIT}"' in header, header
    assert "resource_metadata=" in header
    await assert_untouched(server, handle, alice, legacy_engine)
    # what the token does have still works
    response, body = await call("get_import_status", {"handle": handle}, token=stager)
    assert response.status_code == 200 and "result" in body, body


async def test_another_principal_with_a_valid_token_cannot_use_the_handle(
    server: OAuthServer, idp: Provider, audience: str, legacy_engine: Any
) -> None:
    alice = idp.token("agent", audience)
    handle = await staged(server, alice)
    other = idp.token("other-agent", audience)  # same tenant, every scope, another principal
    for tool, arguments in [
        ("get_import_status", {"handle": handle}),
        ("add_records", {"handle": handle, "records": RECORDS}),
        ("commit_import", {"handle": handle}),
        ("abort_import", {"handle": handle}),
    ]:
        response, body = await server.call(tool, arguments, token=other)
        assert response.status_code == 200
        result = body["result"]
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("handle_not_found:"), (tool, result)
    await assert_untouched(server, handle, alice, legacy_engine)


async def test_a_confirmation_is_bound_to_the_principal_whose_token_asked(
    server: OAuthServer, idp: Provider, audience: str, legacy_engine: Any
) -> None:
    accept = ElicitResult(action="accept", content={"confirm": True})
    alice = idp.token("agent", audience)
    handle = await staged(server, alice)
    async with server.client(alice, elicitation_callback=lambda *a: accept) as client:
        asked = await client.session.call_tool("commit_import", {"handle": handle}, allow_input_required=True)
    assert isinstance(asked, InputRequiredResult)
    other = idp.token("other-agent", audience)  # a valid token of another principal, same tenant
    async with server.client(other, elicitation_callback=lambda *a: accept) as client:
        with pytest.raises(MCPError, match="requestState"):
            await client.session.call_tool(
                "commit_import",
                {"handle": handle},
                input_responses={"confirm": accept},
                request_state=asked.request_state,
                allow_input_required=True,
            )
    await assert_untouched(server, handle, alice, legacy_engine)
