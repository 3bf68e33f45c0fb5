"""Checking an access token: a JWT against the issuer's keys, or RFC 7662 introspection.

Both answer a :class:`VerifiedToken` (the claims, the scopes, the client) or raise
:class:`TokenRefused` with a short reason that goes to the client in ``error_description`` (it names
what is wrong with the token, never its contents), or :class:`ProviderUnavailable`.

A JWT (RFC 9068 access token) is accepted only when

* its header's ``alg`` is in ``ADAPTER_OAUTH_ALGORITHMS`` (asymmetric only; ``none`` never) and fits
  the key its ``kid`` names in the issuer's key set (``keys.py``);
* the signature verifies with that key;
* ``iss`` is exactly the issuer, ``aud`` names this server's resource URL (RFC 8707: a token meant
  for another resource is refused, and no token is ever passed on), ``exp`` is present; ``exp`` and
  ``nbf`` are checked with ``ADAPTER_OAUTH_LEEWAY_SECONDS`` of clock skew.

Introspection (``ADAPTER_OAUTH_INTROSPECTION_URL``, for opaque tokens) posts the token with this
server's client credentials (HTTP Basic) and accepts it only when the answer says ``active`` and
names this server in ``aud``, the issuer in ``iss`` (when given), and an unexpired ``exp``. Every
request is introspected (no cache): a revoked token stops working at once, at the price of one
round trip to the provider per request; JWTs cost none.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import jwt

from adapter.entrypoints.oauth.keys import IssuerKeys, ProviderUnavailable, UnknownKey

__all__ = [
    "IntrospectionVerifier",
    "JwtVerifier",
    "ProviderUnavailable",
    "TokenRefused",
    "VerifiedToken",
    "Verifier",
    "audiences",
]


class TokenRefused(Exception):
    """The token is not good for this server; ``reason`` is safe to send to the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class VerifiedToken:
    """What a checked token says: its claims (or introspection answer), scopes and client."""

    token: str
    claims: Mapping[str, Any]
    scopes: tuple[str, ...]
    client_id: str
    expires_at: int | None


class Verifier(Protocol):
    async def verify(self, token: str) -> VerifiedToken: ...


def audiences(audience: str) -> list[str]:
    """The resource URL as configured and with/without its trailing slash (the same resource)."""
    other = audience.removesuffix("/") if audience.endswith("/") else audience + "/"
    return [audience, other]


def _scopes(claims: Mapping[str, Any]) -> tuple[str, ...]:
    """``scope`` (RFC 9068, space-separated) or ``scp`` (a list or a string, as some providers send)."""
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    return ()


def _client_id(claims: Mapping[str, Any]) -> str:
    for name in ("client_id", "azp", "cid", "appid"):
        value = claims.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _expires_at(claims: Mapping[str, Any]) -> int | None:
    exp = claims.get("exp")
    return int(exp) if isinstance(exp, int | float) else None


_JWT_REFUSALS: list[tuple[type[Exception], str]] = [
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet"),
    (jwt.InvalidAudienceError, "the token was issued for another resource"),
    (jwt.InvalidIssuerError, "the token was issued by another issuer"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
    (jwt.InvalidAlgorithmError, "the token's algorithm is not allowed"),
]


def _header(token: str) -> dict[str, Any]:
    """The JOSE header, read only to choose the key: ``jwt.decode`` parses and checks it again.

    (Not ``jwt.get_unverified_header``: it decodes and checks all three segments, one character at
    a time, which doubled PyJWT's share of a verification.)"""
    head, dot, _ = token.partition(".")
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, binascii.Error):
        header = None
    if not dot or not isinstance(header, dict):
        raise TokenRefused("the token is not a JWT")
    return header


class JwtVerifier:
    """JWT access tokens, checked locally against the issuer's cached keys."""

    def __init__(
        self, keys: IssuerKeys, *, issuer: str, audience: str, algorithms: list[str], leeway: int
    ) -> None:
        self.keys = keys
        self._issuer = issuer
        self._audiences = audiences(audience)
        self._algorithms = frozenset(algorithms)
        self._leeway = leeway

    async def verify(self, token: str) -> VerifiedToken:
        header = _header(token)
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self._algorithms:
            raise TokenRefused("the token's algorithm is not allowed")
        if kid is not None and not isinstance(kid, str):
            raise TokenRefused("the token's key id is not a string")
        try:
            key = await self.keys.key(kid, alg)
        except UnknownKey as exc:
            raise TokenRefused(str(exc)) from None
        claims = self._decode(token, key, alg)
        return VerifiedToken(token, claims, _scopes(claims), _client_id(claims), _expires_at(claims))

    def _decode(self, token: str, key: jwt.PyJWK, alg: str) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[alg],
                audience=self._audiences,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRefused(f"the token has no {exc.claim} claim") from None
        except jwt.InvalidTokenError as exc:
            for kind, reason in _JWT_REFUSALS:
                if isinstance(exc, kind):
                    raise TokenRefused(reason) from None
            raise TokenRefused("the token is not valid") from None
        return claims


class IntrospectionVerifier:
    """Opaque (or any) tokens, asked about at the provider's RFC 7662 endpoint on every request."""

    def __init__(
        self,
        url: str,
        *,
        client_id: str,
        client_secret: str,
        issuer: str,
        audience: str,
        leeway: int,
        http: Callable[[], httpx.AsyncClient],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._url = url
        self._auth = (client_id, client_secret)
        self._issuer = issuer
        self._audiences = frozenset(audiences(audience))
        self._leeway = leeway
        self._http = http
        self._clock = clock

    async def verify(self, token: str) -> VerifiedToken:
        answer = await self._introspect(token)
        if answer.get("active") is not True:
            raise TokenRefused("the token is not active")
        token_type = answer.get("token_type")
        if isinstance(token_type, str) and token_type.lower() not in ("bearer", "access_token"):
            raise TokenRefused("the token is not an access token")
        if "iss" in answer and answer["iss"] != self._issuer:
            raise TokenRefused("the token was issued by another issuer")
        aud = answer.get("aud")
        named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not self._audiences.intersection(named):
            raise TokenRefused("the token was issued for another resource")
        now = self._clock()
        exp, nbf = answer.get("exp"), answer.get("nbf")
        if not isinstance(exp, int | float):
            raise TokenRefused("the token has no exp claim")
        if exp + self._leeway < now:
            raise TokenRefused("the token has expired")
        if isinstance(nbf, int | float) and nbf - self._leeway > now:
            raise TokenRefused("the token is not valid yet")
        return VerifiedToken(token, answer, _scopes(answer), _client_id(answer), int(exp))

    async def _introspect(self, token: str) -> dict[str, Any]:
        try:
            response = await self._http().post(
                self._url,
                data={"token": token, "token_type_hint": "access_token"},
                auth=self._auth,
                headers={"Accept": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(f"introspection: {type(exc).__name__}") from None
        if response.status_code == 400:  # the provider will not introspect this token (a JWT, say)
            raise TokenRefused("the provider does not accept this token for introspection")
        if response.status_code != 200:  # 401: this server's own credentials are wrong; 5xx: it is down
            raise ProviderUnavailable(f"introspection: HTTP {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            raise ProviderUnavailable("introspection: not JSON") from None
        if not isinstance(answer, dict):
            raise ProviderUnavailable("introspection: not a JSON object")
        return answer
