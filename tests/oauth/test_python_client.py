"""The Python SDK's own OAuth client support against the server and the real provider: it starts
with no token, learns the provider from the 401's ``resource_metadata``, gets tokens, steps up its
scopes on each 403 ``insufficient_scope``, and runs an import to its commit. Once as a machine
(client credentials), once as a person (authorization code with PKCE, the sign-in driven headless).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio.to_thread
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp_types import ElicitResult

from adapter.services.admin.reads import ImportFilter
from tests.oauth.conftest import OAuthServer
from tests.support.constants import TIMEOUT
from tests.support.idp import (
    BROWSER_REDIRECT,
    COMMIT,
    READ,
    SECRET,
    WRITE,
    Provider,
    claims_of,
    needs_idp,
    sign_in,
)

pytestmark = [pytest.mark.anyio, needs_idp]


class MemoryStorage:
    """The SDK's TokenStorage, in memory (a real client keeps it in a keychain or a file)."""

    def __init__(self, client_info: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


async def run_import(
    server: OAuthServer, http: httpx2.AsyncClient, mode: str, elicitation_callback: Any = None
) -> dict[str, Any]:
    async with Client(
        streamable_http_client(server.url, http_client=http),
        cache=None,
        read_timeout_seconds=TIMEOUT,
        mode=mode,  # type: ignore[arg-type]
        elicitation_callback=elicitation_callback,
    ) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        assert "commit_import" in tools
        handle = server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]
        records = [{"id": i, "name": f"c{i}"} for i in range(5)]
        await client.call_tool("add_records", {"handle": handle, "records": records})
        committed = server.structured(await client.call_tool("commit_import", {"handle": handle}))
        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
    return {"committed": committed, "status": status}


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28, and a 2025-11-25 session
async def test_client_credentials_discovered_from_the_401_stepping_up_to_commit(
    server: OAuthServer, idp: Provider, legacy_engine: Any, mode: str
) -> None:
    seen: list[tuple[str, int]] = []

    async def record(response: httpx2.Response) -> None:
        seen.append((response.request.url.path, response.status_code))

    storage = MemoryStorage()
    auth = ClientCredentialsOAuthProvider(
        server_url=server.url, storage=storage, client_id="agent", client_secret=SECRET, issuer=idp.issuer
    )
    async with httpx2.AsyncClient(auth=auth, timeout=TIMEOUT, event_hooks={"response": [record]}) as http:
        out = await run_import(server, http, mode)

    assert out["committed"]["status"] == "committed" and out["status"]["status"] == "committed"
    assert len(legacy_engine.committed_batches()) == 1
    # the dance: 401 -> metadata -> the provider's metadata -> a token; then a 403 per missing scope
    assert seen[0] == ("/mcp", 401)
    assert ("/.well-known/oauth-protected-resource/mcp", 200) in seen
    assert [status for path, status in seen if path == "/mcp" and status == 403] == [
        403,
        403,
    ]  # write, commit
    assert [path for path, status in seen].count("/token") == 3  # read, + write, + commit
    assert storage.tokens is not None
    assert set((storage.tokens.scope or "").split()) == {READ, WRITE, COMMIT}
    assert claims_of(storage.tokens.access_token)["aud"] == server.url  # RFC 8707: asked for this server
    [stored] = server.kit.admin.list_imports(ImportFilter()).items
    assert (stored.principal, stored.tenant) == ("agent", "acme")  # sub, and the tenant claim


async def test_authorization_code_with_pkce_signs_a_person_in_and_commits(
    server: OAuthServer, idp: Provider, legacy_engine: Any
) -> None:
    redirected: dict[str, str] = {}

    async def open_browser(authorization_url: str) -> None:
        query = parse_qs(urlsplit(authorization_url).query)
        assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]  # PKCE
        assert query["resource"] == [server.url]
        redirected.update(await anyio.to_thread.run_sync(sign_in, authorization_url, "alice"))

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=redirected["code"], state=redirected["state"], iss=redirected["iss"]
        )

    registered = OAuthClientInformationFull(  # registered at the provider beforehand, as a company does
        client_id="browser",
        redirect_uris=[BROWSER_REDIRECT],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    storage = MemoryStorage(registered)
    auth = OAuthClientProvider(
        server_url=server.url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[BROWSER_REDIRECT],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=open_browser,
        callback_handler=callback,
    )
    async with httpx2.AsyncClient(auth=auth, timeout=TIMEOUT) as http:
        out = await run_import(server, http, "auto")

    assert out["committed"]["status"] == "committed"
    assert len(legacy_engine.committed_batches()) == 1
    [stored] = server.kit.admin.list_imports(ImportFilter()).items
    assert (stored.principal, stored.tenant) == ("alice", "acme")  # the person who signed in


@pytest.mark.parametrize(
    "mode", ["auto", "legacy"]
)  # sealed requestState (MRTR) / elicitation in the session
async def test_the_commit_confirmation_round_trip_runs_on_the_providers_tokens(
    server: OAuthServer, idp: Provider, legacy_engine: Any, mode: str
) -> None:
    asked: list[str] = []

    async def accept(ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True})

    auth = ClientCredentialsOAuthProvider(
        server_url=server.url,
        storage=MemoryStorage(),
        client_id="agent",
        client_secret=SECRET,
        issuer=idp.issuer,
    )
    async with httpx2.AsyncClient(auth=auth, timeout=TIMEOUT) as http:
        out = await run_import(server, http, mode, elicitation_callback=accept)
    assert out["committed"]["status"] == "committed"
    assert len(asked) == 1 and "5 staged records" in asked[0], asked
    assert len(legacy_engine.committed_batches()) == 1
