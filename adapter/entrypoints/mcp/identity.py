"""Who is calling: bearer tokens from ``ADAPTER_TOKENS``, an identity provider's tokens, or the
single local principal.

The token file maps opaque tokens to a principal and tenant:
``{"<token>": {"principal": "alice", "tenant": "acme"}}``. The SDK's bearer middleware calls
:class:`StaticTokenVerifier`; a missing or unknown token gets 401 before any handler runs. In
resource-server mode (``ADAPTER_OAUTH_ISSUER``) the principal and tenant come from the token's
claims (``adapter/entrypoints/oauth/``). Either way the verified token is a :class:`CallerToken`
carrying the one :class:`~adapter.domain.identity.Principal`, so handles, operations, cursors and
confirmation state are bound the same way whichever kind of token it was. Without either the server
runs in local mode: loopback only, one principal, handles act as bearer secrets.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from pydantic import BaseModel, ValidationError

from adapter.config import ConfigError
from adapter.domain.identity import Principal

__all__ = [
    "LOCAL_PRINCIPAL",
    "CallerToken",
    "StaticTokenVerifier",
    "Unauthenticated",
    "current_principal",
    "load_token_file",
]

LOCAL_PRINCIPAL = Principal(subject="local", tenant="local")


class CallerToken(AccessToken):
    """The SDK's access token plus who the caller is, decided once, when the token was verified."""

    principal: Principal


class _TokenEntry(BaseModel):
    principal: str
    tenant: str


def load_token_file(path: str) -> dict[str, Principal]:
    """Read and validate the token file; any problem is a one-line ConfigError."""
    try:
        raw = json.loads(Path(path).read_text())
        if not isinstance(raw, dict) or not raw:
            raise ValueError("expected a non-empty JSON object of token -> {principal, tenant}")
        entries = {token: _TokenEntry.model_validate(value) for token, value in raw.items()}
    except (OSError, ValueError, ValidationError) as exc:
        reason = str(exc).splitlines()[0]
        raise ConfigError(f"invalid setting ADAPTER_TOKENS: cannot use {path}: {reason}") from None
    if any(len(token) < 16 for token in entries):
        raise ConfigError("invalid setting ADAPTER_TOKENS: every token must be at least 16 characters")
    return {token: Principal(subject=e.principal, tenant=e.tenant) for token, e in entries.items()}


class StaticTokenVerifier:
    """Verifies bearer tokens against the token file, in constant time per token."""

    def __init__(self, tokens: dict[str, Principal]) -> None:
        self._tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        for known, principal in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return CallerToken(
                    token=token,
                    client_id=f"{principal.tenant}/{principal.subject}",
                    scopes=["import"],
                    subject=principal.subject,
                    claims={"tenant": principal.tenant},
                    principal=principal,
                )
        return None


class Unauthenticated(Exception):
    """Auth is on but the request carries no verified token (the HTTP layer should have said 401)."""


def current_principal(*, auth_required: bool) -> Principal:
    """The caller of the current request: the token's principal, or the local one when auth is off."""
    token = get_access_token()
    if isinstance(token, CallerToken):
        return token.principal
    if auth_required:
        raise Unauthenticated()
    return LOCAL_PRINCIPAL
