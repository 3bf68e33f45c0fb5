"""Resource-server mode put together from the settings: verifier, scopes, metadata, challenges.

:class:`ResourceServer` is built once per app by ``create_app`` when ``ADAPTER_OAUTH_ISSUER`` is
set. It publishes the RFC 9728 protected-resource metadata with the SDK's own model and handler,
at the path-suffixed well-known URI (``/.well-known/oauth-protected-resource/mcp``, the one a 401
names) and at the root form (``/.well-known/oauth-protected-resource``) for clients that look
there:

```json
{"resource": "https://mcp.example.com/mcp", "authorization_servers": ["https://idp.example.com"],
 "scopes_supported": ["imports:read", "imports:write", "imports:commit", "imports:abort"],
 "bearer_methods_supported": ["header"], "resource_name": "Legacy import adapter"}
```
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import httpx
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.routing import Route

from adapter.config import ConfigError, Settings
from adapter.entrypoints.mcp.identity import CallerToken
from adapter.entrypoints.oauth.callers import ClaimRules, Role
from adapter.entrypoints.oauth.guard import Challenges
from adapter.entrypoints.oauth.keys import IssuerKeys
from adapter.entrypoints.oauth.scopes import ScopePolicy
from adapter.entrypoints.oauth.verify import IntrospectionVerifier, JwtVerifier, Verifier

__all__ = ["CheckedTokens", "ResourceServer", "check_oauth_settings"]

ROOT_METADATA_PATH = "/.well-known/oauth-protected-resource"
HTTP_TIMEOUT_SECONDS = 5.0


class CheckedTokens:
    """JWTs already checked, and who they name: a client sends the same token for its whole life.

    Checking a JWT again gives the same answer until it expires (or its key is withdrawn, which the
    key cache learns only after ``ADAPTER_OAUTH_JWKS_MAX_AGE_SECONDS`` anyway), so a token checked
    once is believed until its ``exp`` (with the leeway), for ``lifetime`` seconds at most. Only
    accepted tokens are kept, at most ``size`` of them (the oldest goes first). Introspected tokens
    are never kept: introspection is chosen so that a revoked token stops at once.
    """

    def __init__(
        self, *, leeway: int, lifetime: float = 60.0, size: int = 4096, clock: Callable[[], float] = time.time
    ) -> None:
        self._entries: dict[str, tuple[CallerToken, float]] = {}
        self._leeway = leeway
        self._lifetime = lifetime
        self._size = size
        self._clock = clock

    def get(self, token: str) -> CallerToken | None:
        entry = self._entries.get(token)
        if entry is None:
            return None
        if self._clock() >= entry[1]:
            self._entries.pop(token, None)
            return None
        return entry[0]

    def put(self, token: str, caller: CallerToken) -> None:
        until = self._clock() + self._lifetime
        if caller.expires_at is not None:
            until = min(until, caller.expires_at + self._leeway)
        if len(self._entries) >= self._size:
            self._entries.pop(next(iter(self._entries)), None)
        self._entries[token] = (caller, until)


def check_oauth_settings(settings: Settings) -> None:
    """Settings that only make sense together; one ConfigError line otherwise."""
    if settings.oauth_issuer is None:
        stray = [
            name
            for name in (
                "oauth_audience",
                "oauth_introspection_url",
                "oauth_client_id",
                "oauth_client_secret",
            )
            if getattr(settings, name) is not None
        ]
        if stray:
            raise ConfigError(f"invalid setting ADAPTER_{stray[0].upper()}: needs ADAPTER_OAUTH_ISSUER")
        return
    if settings.tokens is not None:
        raise ConfigError(
            "invalid setting ADAPTER_TOKENS: a token file and ADAPTER_OAUTH_ISSUER exclude each other "
            "(the token file is for local use and tests; the identity provider for production)"
        )
    credentials = settings.oauth_client_id is not None and settings.oauth_client_secret is not None
    if settings.oauth_introspection_url is not None and not credentials:
        raise ConfigError(
            "invalid setting ADAPTER_OAUTH_INTROSPECTION_URL: needs ADAPTER_OAUTH_CLIENT_ID and "
            "ADAPTER_OAUTH_CLIENT_SECRET (this server's credentials at the provider)"
        )


class ResourceServer:
    """Everything resource-server mode needs, for one app."""

    def __init__(self, settings: Settings, *, audience: str, published_tools: Iterable[str]) -> None:
        check_oauth_settings(settings)
        assert settings.oauth_issuer is not None
        self.issuer = settings.oauth_issuer
        self.audience = audience
        self.resource_name = settings.server_title
        self.rules = ClaimRules.from_settings(settings)
        self._scopes = ScopePolicy.from_settings(settings, published_tools)
        self.metadata_url = str(build_resource_metadata_url(AnyHttpUrl(audience)))
        self._challenges = Challenges(self.metadata_url)
        self._client: httpx.AsyncClient | None = None
        self.keys: IssuerKeys | None = None
        self.checked: CheckedTokens | None = None
        self.verifier: Verifier
        if settings.oauth_introspection_url is not None:
            assert settings.oauth_client_id is not None and settings.oauth_client_secret is not None
            self.verifier = IntrospectionVerifier(
                settings.oauth_introspection_url,
                client_id=settings.oauth_client_id,
                client_secret=settings.oauth_client_secret,
                issuer=self.issuer,
                audience=audience,
                leeway=settings.oauth_leeway_seconds,
                http=self.http,
            )
        else:
            self.keys = IssuerKeys(
                self.issuer,
                self.http,
                refetch_seconds=settings.oauth_jwks_refetch_seconds,
                max_age_seconds=settings.oauth_jwks_max_age_seconds,
            )
            self.checked = CheckedTokens(leeway=settings.oauth_leeway_seconds)
            self.verifier = JwtVerifier(
                self.keys,
                issuer=self.issuer,
                audience=audience,
                algorithms=settings.oauth_algorithms,
                leeway=settings.oauth_leeway_seconds,
            )

    @property
    def scopes(self) -> ScopePolicy:
        return self._scopes

    @property
    def challenges(self) -> Challenges:
        return self._challenges

    def http(self) -> httpx.AsyncClient:
        """The one HTTP client to the provider (made on first use, on the app's event loop)."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS, follow_redirects=False)
        return self._client

    async def caller(self, token: str) -> CallerToken:
        """The MCP caller of a token (TokenRefused, ProviderUnavailable)."""
        known = self.checked.get(token) if self.checked is not None else None
        if known is not None:
            return known
        caller = self.rules.caller(await self.verifier.verify(token))
        if self.checked is not None:
            self.checked.put(token, caller)
        return caller

    async def operator(self, token: str) -> tuple[Role, str] | None:
        """The admin role a token grants and its holder, or None (TokenRefused, ProviderUnavailable)."""
        return self.rules.role(await self.verifier.verify(token))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the app's lifespan: the provider's HTTP client is closed when the app stops."""
        try:
            yield
        finally:
            if self._client is not None:
                await self._client.aclose()
                self._client = None

    async def warm_up(self) -> None:
        if self.keys is not None:
            await self.keys.warm_up()

    # --- RFC 9728 metadata ------------------------------------------------------------------------

    def metadata(self) -> ProtectedResourceMetadata:
        # Validated by the model itself, whose URL type keeps a path-less issuer as it is written
        # (no trailing slash added): clients compare it with the issuer's metadata character by character.
        return ProtectedResourceMetadata.model_validate(
            {
                "resource": self.audience,
                "authorization_servers": [self.issuer],
                "scopes_supported": self.scopes.supported,
                "bearer_methods_supported": ["header"],
                "resource_name": self.resource_name,
            }
        )

    def metadata_routes(self, mcp_path: str) -> list[Route]:
        """The metadata at the root form, the audience's path-suffixed form, and this app's own path."""
        endpoint = cors_middleware(
            ProtectedResourceMetadataHandler(self.metadata()).handle, ["GET", "OPTIONS"]
        )
        paths = dict.fromkeys(
            [ROOT_METADATA_PATH, urlsplit(self.metadata_url).path, ROOT_METADATA_PATH + mcp_path]
        )
        return [Route(path, endpoint=endpoint, methods=["GET", "OPTIONS"]) for path in paths]
