"""OAuth for servers that ask for it: a token per (server, principal), through the SDK's client support.

A server in resource-server mode answers a request without a token with 401 and the URL of its
protected-resource metadata (RFC 9728), and one whose token lacks a scope with 403
``insufficient_scope`` naming the scope to ask for. ``ServerSpec(oauth=OAuth(...))`` lets the host
meet both with the MCP SDK's own providers instead of a static bearer token: discovery from the 401,
authorization-server metadata, the token request with the RFC 8707 ``resource``, step-up by the
union of the scopes held and the scope named, refresh before an expired token is sent (and the
rotated refresh token kept, when the provider rotates it). Which grant a principal gets:

* a service principal named in ``OAuth.services``: the client-credentials grant with its own
  client id and secret (:class:`ClientCredentials`; the SDK's ``ClientCredentialsOAuthProvider``,
  pinned to ``OAuth.issuer``);
* anyone else, when ``OAuth.users`` is given: the authorization code with PKCE (the SDK's
  ``OAuthClientProvider``, as a pre-registered public client): the host is the application, so the
  application's ``sign_in`` callback gets a :class:`SignIn` (server, principal, authorization URL,
  scopes) and returns the redirect's code, state and ``iss``; a step-up asks it again;
* nobody else: no credentials, as with a static token missing (``no_credentials``).

The binding: every token is obtained for and stored under its :class:`TokenKey` (server id and
principal, that is id *and* tenant) in a :class:`TokenStore` (:class:`MemoryTokenStore` by default),
and only ever sent on that principal's connections to that server. The OAuth traffic itself (the
server's metadata, the provider's metadata and token endpoint) goes beside the MCP wire, never
through the wire guard, and only to two places: ``GET /.well-known/...`` on the server's origin, and
the configured issuer's origin; a request the SDK would send anywhere else (to an authorization
server that a server's metadata names instead of the configured one, a refresh to the server's
origin when no provider metadata is known) is refused before it leaves, so no secret, code or
refresh token reaches another host. Tokens, secrets and codes go into no log, audit event, error or
``repr``: the audit gets one event per token request, with its grant, the scopes granted and the
outcome.

Concurrency: the SDK's provider holds its lock from before a request until its answer arrives. Here
a valid token is sent without it, so one principal's calls to one server run side by side (a
long-poll, a listen stream, a commit); only when there is no valid token, or the answer is a challenge,
does the SDK's flow run, under its lock, once per (server, principal) at a time. That flow's first
sending of the request is answered with the challenge just received when it carries the same token,
so a challenge costs no second round trip.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from adapter.host.audit import AuditEvent, AuditLog
from adapter.host.errors import PolicyDenied

if TYPE_CHECKING:
    from adapter.host.connection import Principal

__all__ = [
    "AuthorizationCode",
    "ClientCredentials",
    "MemoryTokenStore",
    "OAuth",
    "SignIn",
    "SignInHandler",
    "TokenKey",
    "TokenStore",
]

OAUTH_TOOL = "(oauth)"
"""The ``tool`` of the audit events about tokens (they belong to no tool call)."""


@dataclass(frozen=True)
class TokenKey:
    """Whose token: one server (by the host's id for it) and one principal (id and tenant)."""

    server: str
    principal: Principal


class TokenStore(Protocol):
    """Where the host keeps tokens, one set per (server, principal). A real host keeps them in a
    secret store; whatever it is, it must never hand one key's tokens out under another key."""

    async def get_tokens(self, key: TokenKey) -> OAuthToken | None: ...

    async def set_tokens(self, key: TokenKey, tokens: OAuthToken) -> None: ...


class MemoryTokenStore:
    """The default :class:`TokenStore`: a dict in this process (tokens die with the host)."""

    def __init__(self) -> None:
        self._tokens: dict[TokenKey, OAuthToken] = {}

    async def get_tokens(self, key: TokenKey) -> OAuthToken | None:
        return self._tokens.get(key)

    async def set_tokens(self, key: TokenKey, tokens: OAuthToken) -> None:
        self._tokens[key] = tokens

    def keys(self) -> list[TokenKey]:
        """Whose tokens are held (never the tokens)."""
        return list(self._tokens)

    def __repr__(self) -> str:
        return f"MemoryTokenStore({len(self._tokens)} keys)"


@dataclass(frozen=True)
class ClientCredentials:
    """A service principal's own registration at the provider: the client-credentials grant."""

    client_id: str
    client_secret: str = field(repr=False)
    auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"


@dataclass(frozen=True)
class SignIn:
    """What the application is asked to do: get ``principal`` signed in at ``url`` (the provider's
    authorization endpoint, with PKCE, state and ``resource``) for ``server``, and return the code,
    state and ``iss`` of the redirect. ``scopes`` are the ones asked for (a step-up asks for more)."""

    server: str
    principal: Principal
    url: str
    scopes: tuple[str, ...]


SignInHandler = Callable[[SignIn], Awaitable[AuthorizationCodeResult]]


@dataclass(frozen=True)
class AuthorizationCode:
    """The host as an application registered at the provider (a public client: no secret), for
    people: the authorization code with PKCE, the sign-in done by the application's ``sign_in``."""

    client_id: str
    redirect_uri: str
    sign_in: SignInHandler = field(repr=False)


@dataclass(eq=False)
class OAuth:
    """Tokens for one server from the provider at ``issuer`` (see the module docstring).

    ``services`` maps a service principal to its client credentials; ``users`` is how everyone else
    signs in (None: nobody else has credentials); ``store`` keeps the tokens.
    """

    issuer: str
    services: Mapping[Principal, ClientCredentials] = field(default_factory=dict)
    users: AuthorizationCode | None = None
    store: TokenStore = field(default_factory=MemoryTokenStore)
    _grants: dict[TokenKey, OAuthClientProvider] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if urlsplit(self.issuer).scheme not in ("http", "https"):
            raise ValueError(f"OAuth issuer must be an http(s) URL, got {self.issuer!r}")
        if not self.services and self.users is None:
            raise ValueError("OAuth needs services (client credentials) or users (authorization code)")

    def serves(self, principal: Principal) -> bool:
        """Whether the host can obtain a token for ``principal`` here."""
        return principal in self.services or self.users is not None

    def auth(
        self, server: str, url: str, principal: Principal, audit: AuditLog | None, timeout: float
    ) -> httpx2.Auth:
        """The httpx2 auth for one connection of ``principal`` to ``server`` (at ``url``)."""
        if not self.serves(principal):
            raise PolicyDenied(f"no credentials for {principal.key!r} on {server!r}")
        key = TokenKey(server, principal)
        grant = self._grants.get(key)
        if grant is None:
            grant = self._grants[key] = self._grant(key, url)
        return _Authorizer(grant, key, _Fence(url, self.issuer), audit, timeout)

    def _grant(self, key: TokenKey, url: str) -> OAuthClientProvider:
        storage = _BoundStorage(self.store, key)
        service = self.services.get(key.principal)
        if service is not None:
            return ClientCredentialsOAuthProvider(
                server_url=url,
                storage=storage,
                client_id=service.client_id,
                client_secret=service.client_secret,
                token_endpoint_auth_method=service.auth_method,
                issuer=self.issuer,
            )
        users = self.users
        assert users is not None
        grants = ["authorization_code", "refresh_token"]
        storage.client_info = OAuthClientInformationFull(  # pre-registered, bound to this issuer
            client_id=users.client_id,
            redirect_uris=[users.redirect_uri],  # type: ignore[list-item]
            grant_types=grants,
            response_types=["code"],
            token_endpoint_auth_method="none",
            issuer=self.issuer,
        )
        metadata = OAuthClientMetadata(
            redirect_uris=[users.redirect_uri],  # type: ignore[list-item]
            grant_types=grants,
            response_types=["code"],
            token_endpoint_auth_method="none",
        )
        person = _PersonSignIn(key, users.sign_in, _Fence(url, self.issuer))
        return OAuthClientProvider(
            server_url=url,
            client_metadata=metadata,
            storage=storage,
            redirect_handler=person.redirect,
            callback_handler=person.callback,
        )


class _BoundStorage:
    """The SDK's ``TokenStorage`` for one provider: the host's store under one key."""

    def __init__(self, store: TokenStore, key: TokenKey) -> None:
        self._store, self._key = store, key
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return await self._store.get_tokens(self._key)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self._store.set_tokens(self._key, tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def _origin(url: str | httpx2.URL) -> tuple[str, str, int | None]:
    parsed = httpx2.URL(str(url))
    return parsed.scheme, parsed.host, parsed.port


@dataclass(frozen=True)
class _Fence:
    """Where the host's OAuth requests may go: the server's metadata and the configured issuer."""

    server_url: str
    issuer: str

    def check(self, request: httpx2.Request) -> None:
        origin = _origin(request.url)
        if origin == _origin(self.issuer):
            return
        metadata = request.method == "GET" and request.url.path.startswith("/.well-known/")
        if origin == _origin(self.server_url) and metadata:
            return
        raise PolicyDenied(
            f"OAuth request to {request.url.scheme}://{request.url.host} refused: "
            f"only the server's metadata and the issuer {self.issuer} are asked"
        )


class _PersonSignIn:
    """Bridges the SDK's redirect and callback handlers to the application's one ``sign_in``."""

    def __init__(self, key: TokenKey, sign_in: SignInHandler, fence: _Fence) -> None:
        self._key, self._sign_in, self._fence = key, sign_in, fence
        self._url: str | None = None

    async def redirect(self, url: str) -> None:
        self._fence.check(httpx2.Request("GET", url))  # a person is sent to the configured issuer only
        self._url = url

    async def callback(self) -> AuthorizationCodeResult:
        url, self._url = self._url, None
        assert url is not None, "the SDK calls the redirect handler before the callback"
        scopes = tuple(" ".join(parse_qs(urlsplit(url).query).get("scope", [])).split())
        return await self._sign_in(SignIn(self._key.server, self._key.principal, url, scopes))


def _challenged(response: httpx2.Response) -> bool:
    """A 401, or a 403 ``insufficient_scope`` (a step-up): what the SDK's flow answers."""
    if response.status_code == 401:
        return True
    error = extract_field_from_www_auth(response, "error")
    return response.status_code == 403 and error == "insufficient_scope"


class _Authorizer(httpx2.Auth):
    """One connection's auth: the valid token of its (server, principal), or the SDK's flow.

    The flow's own requests go through a client of their own (fenced, see :class:`_Fence`), not
    back to httpx2: the connection's transport is the wire guard, which lets only the configured MCP
    endpoint through. Only the MCP request itself goes out on the connection.
    """

    def __init__(
        self,
        grant: OAuthClientProvider,
        key: TokenKey,
        fence: _Fence,
        audit: AuditLog | None,
        timeout: float,
    ) -> None:
        self._grant, self._key, self._fence = grant, key, fence
        self._audit, self._timeout = audit, timeout

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        known: httpx2.Response | None = None
        sent = self._valid_header()
        if sent is not None:
            request.headers["Authorization"] = sent
            response = yield request
            if not _challenged(response):
                return
            known = response
        async with httpx2.AsyncClient(timeout=self._timeout, follow_redirects=False) as side:
            flow = self._grant.async_auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    if outgoing is not request:
                        response = await self._aside(side, outgoing, request)
                    elif known is not None and outgoing.headers.get("Authorization") == sent:
                        response, known = known, None  # what the server said to this very token
                    else:
                        known = None
                        response = yield outgoing
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            finally:
                await flow.aclose()

    def _valid_header(self) -> str | None:
        """The Authorization header of the provider's current token while it is valid, else None.

        Read from the SDK provider's ``context`` (a public attribute): the tokens it holds and
        their expiry, as its own flow keeps them."""
        context = self._grant.context
        tokens = context.current_tokens
        if tokens is None or not context.is_token_valid():
            return None
        return f"Bearer {tokens.access_token}"

    async def _aside(
        self, side: httpx2.AsyncClient, outgoing: httpx2.Request, request: httpx2.Request
    ) -> httpx2.Response:
        self._fence.check(outgoing)
        response = await side.send(outgoing)
        form = parse_qs(outgoing.content.decode("ascii", "replace")) if outgoing.method == "POST" else {}
        if "grant_type" in form:
            self._record(form["grant_type"][0], response, request)
        return response

    def _record(self, grant: str, response: httpx2.Response, request: httpx2.Request) -> None:
        """One audit event per token request: grant, scopes granted, outcome; never a token."""
        if self._audit is None:
            return
        try:
            body = json.loads(response.content)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        if response.status_code == 200:
            outcome = "token_granted"
            detail = f"{grant}: {body.get('scope', '')}".strip()
        else:
            outcome = "token_refused"
            detail = f"{grant}: HTTP {response.status_code} {str(body.get('error', ''))[:40]}".strip()
        principal = self._key.principal
        self._audit.record(
            AuditEvent(
                AuditLog.now(),
                self._key.server,
                principal.id,
                OAUTH_TOOL,
                "",
                outcome,
                "",
                _trace_of(request),
                detail,
                principal.tenant,
            )
        )


def _trace_of(request: httpx2.Request) -> str:
    """The trace id of the MCP request a token was obtained for (its ``_meta`` traceparent), or ""."""
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return ""
    meta = ((message.get("params") or {}).get("_meta") or {}) if isinstance(message, dict) else {}
    parts = str(meta.get("traceparent", "")).split("-")
    return parts[1] if len(parts) == 4 else ""
