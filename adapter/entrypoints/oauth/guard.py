"""The resource server's checks in front of the SDK's MCP app: 401, 403, or the caller.

Per request, before the SDK parses anything:

1. No ``Authorization: Bearer`` token: **401** ``WWW-Authenticate: Bearer resource_metadata="...",
   scope="<what this request needs>"`` (no ``error``: RFC 6750 §3.1). A client discovers the
   authorization server from the metadata URL.
2. A token the verifier refuses (bad signature, ``alg`` not allowed, expired, another audience,
   another issuer, no tenant...): **401** with ``error="invalid_token"`` and the reason in
   ``error_description``. The provider not answering: **503** with ``Retry-After``.
3. A valid token without the scope the request needs: **403** ``error="insufficient_scope"``,
   ``scope="<the scopes to ask for>"`` (the needed one plus those the token already has, so a
   client that replaces its scopes on a step-up keeps what it had). Nothing reaches the server.
4. Otherwise the SDK's app runs with the caller set where the SDK puts it (``scope["user"]``, and
   through the SDK's ``AuthContextMiddleware`` the ``get_access_token()`` context), so the
   handlers' ``current_principal()``, the ``requestState`` binding and the 2025-era session owner
   check all see the same :class:`~adapter.entrypoints.mcp.identity.CallerToken`.

What a request needs (``scopes.py``) is read from the ``Mcp-Method`` and ``Mcp-Name`` headers in the
2026-07-28 era: the SDK refuses a request whose body disagrees with them (400, -32020), so they
cannot be used to pass a commit off as a read; a header sent twice counts with every value. A
2025-era POST carries no such headers, so its body is read (once the token is known to be valid)
and handed on unchanged. The SDK's own ``RequireAuthMiddleware`` is not used because it knows only
one fixed scope list for every request and names no scope in its 401.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any, Protocol

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.shared.inbound import decode_header_value
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.authentication import AuthCredentials
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapter.entrypoints.mcp.identity import CallerToken
from adapter.entrypoints.oauth.scopes import ScopePolicy
from adapter.entrypoints.oauth.verify import ProviderUnavailable, TokenRefused

__all__ = ["Authenticator", "Challenges", "ResourceServerGuard", "bearer_token"]

log = logging.getLogger("adapter.auth")

_AUTHORIZATION = b"authorization"
_VERSION = b"mcp-protocol-version"
_METHOD = b"mcp-method"
_NAME = b"mcp-name"


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The token of the ``Authorization: Bearer`` header (never the query string), or None."""
    for key, value in headers:
        if key.lower() == _AUTHORIZATION:
            text = bytes(value).decode("latin-1")
            if text[:7].lower() == "bearer " and text[7:].strip():
                return text[7:].strip()
            return None
    return None


def _safe(text: str) -> str:
    """A header parameter value: printable ASCII without quote or backslash."""
    return "".join(c for c in text if " " <= c <= "~" and c not in '"\\')[:300]


class Challenges:
    """The 401, 403 and 503 answers, all naming the protected-resource metadata."""

    def __init__(self, metadata_url: str) -> None:
        self.metadata_url = metadata_url

    def header(self, *, error: str | None = None, description: str | None = None, scope: str = "") -> bytes:
        parts = [f'error="{error}"'] if error else []
        if error and description:  # without an error code, no error information (RFC 6750 3.1)
            parts.append(f'error_description="{_safe(description)}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        if scope:
            parts.append(f'scope="{_safe(scope)}"')
        return ("Bearer " + ", ".join(parts)).encode("ascii")

    async def send(
        self,
        send: Send,
        status: int,
        *,
        error: str | None = None,
        description: str,
        scope: str = "",
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        body = json.dumps({"error": error or "unauthorized", "error_description": description}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            *(extra or []),
        ]
        if status in (401, 403):
            headers.append(
                (b"www-authenticate", self.header(error=error, description=description, scope=scope))
            )
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class Authenticator(Protocol):
    """What the guard needs from the resource server (``ResourceServer`` in ``wiring.py``)."""

    @property
    def scopes(self) -> ScopePolicy: ...

    @property
    def challenges(self) -> Challenges: ...

    async def caller(self, token: str) -> CallerToken: ...


class ResourceServerGuard:
    """ASGI wrapper of the SDK's MCP app in resource-server mode (see the module docstring)."""

    def __init__(self, app: ASGIApp, server: Authenticator, path: str = "/mcp") -> None:
        self.app = AuthContextMiddleware(app)
        self.server = server
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)  # lifespan, and the SDK's 404 for any other path
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        from_body = scope["method"] == "POST" and not _is_modern(headers)  # a 2025-era POST
        needed = set() if from_body else _needed_by_headers(self.server.scopes, scope, headers)
        caller = await self._authenticate(bearer_token(headers), needed, send)
        if caller is None:
            return
        if from_body:
            body, receive = await _read_body(receive)
            if body is None:
                return  # the client went away (or the body limit answered 413)
            needed = _needed_by_body(self.server.scopes, body)
        if not await self._authorized(caller, needed, send):
            return
        scope["user"] = AuthenticatedUser(caller)
        scope["auth"] = AuthCredentials(caller.scopes)
        await self.app(scope, receive, send)

    async def _authenticate(self, token: str | None, needed: set[str], send: Send) -> CallerToken | None:
        """The token's caller, or None once the 401 (or 503) is sent."""
        challenges = self.server.challenges
        wanted = " ".join(sorted(needed)) or self.server.scopes.minimum
        if token is None:
            await challenges.send(send, 401, description="a bearer token is required", scope=wanted)
            return None
        try:
            return await self.server.caller(token)
        except TokenRefused as exc:
            _log(401, exc.reason)
            await challenges.send(send, 401, error="invalid_token", description=exc.reason, scope=wanted)
        except ProviderUnavailable as exc:
            log.warning(json.dumps({"event": "auth.provider_unavailable", "reason": str(exc)}))
            await challenges.send(
                send,
                503,
                error="temporarily_unavailable",
                description="the identity provider did not answer; try again",
                extra=[(b"retry-after", b"5")],
            )
        return None

    async def _authorized(self, caller: CallerToken, needed: set[str], send: Send) -> bool:
        """Whether the token has every scope the request needs; else the 403 step-up is sent."""
        missing = needed.difference(caller.scopes)
        if not missing:
            return True
        _log(403, "insufficient_scope", sorted(missing))
        supported = self.server.scopes.supported
        ask = [s for s in supported if s in needed or s in caller.scopes]  # keep what it has
        await self.server.challenges.send(
            send,
            403,
            error="insufficient_scope",
            description=f"this request needs the scope {' '.join(sorted(missing))}",
            scope=" ".join(ask),
        )
        return False


def _log(status: int, reason: str, missing: list[str] | None = None) -> None:
    entry: dict[str, Any] = {"event": "auth.refused", "status": status, "reason": reason}
    if missing:
        entry["missing"] = missing
    log.info(json.dumps(entry))


def _values(headers: list[tuple[bytes, bytes]], name: bytes) -> list[str]:
    return [bytes(v).decode("latin-1") for k, v in headers if k.lower() == name]


def _is_modern(headers: list[tuple[bytes, bytes]]) -> bool:
    """The SDK's own routing: a protocol-version header naming no handshake version is 2026-07-28."""
    versions = _values(headers, _VERSION)
    return bool(versions) and versions[0] not in HANDSHAKE_PROTOCOL_VERSIONS


def _needed_by_headers(policy: ScopePolicy, scope: Scope, headers: list[tuple[bytes, bytes]]) -> set[str]:
    if scope["method"] == "GET":
        return {policy.for_legacy_stream()}
    if scope["method"] != "POST":
        return set()
    names: list[str | None] = [decode_header_value(n) for n in _values(headers, _NAME)] or [None]
    needed = {policy.needed(method, name) for method in _values(headers, _METHOD) for name in names}
    return {s for s in needed if s is not None}


def _needed_by_body(policy: ScopePolicy, body: bytes) -> set[str]:
    """What a 2025-era POST needs: every message of it (a batch counts with each of its requests)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return set()  # not JSON: the SDK answers the parse error
    needed: set[str] = set()
    for message in parsed if isinstance(parsed, list) else [parsed]:
        if not isinstance(message, dict):
            continue
        method, params = message.get("method"), message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        scope = policy.needed(
            method if isinstance(method, str) else None, name if isinstance(name, str) else None
        )
        if scope is not None:
            needed.add(scope)
    return needed


async def _read_body(receive: Receive) -> tuple[bytes | None, Receive]:
    """The whole request body, and a ``receive`` that hands it on as one message, then the rest."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None, receive
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay
