"""The issuer's signing keys: found through its metadata, cached, fetched again when they rotate.

* **Discovery**: the OpenID configuration (``<issuer>/.well-known/openid-configuration``), else the
  RFC 8414 authorization-server metadata (``/.well-known/oauth-authorization-server`` with the
  issuer's path appended). The document must name exactly the configured issuer; its ``jwks_uri``
  is where the keys are.
* **Cache**: every request is checked against the keys in memory; nothing goes over the network
  per request. The set is fetched again when a token names a ``kid`` the cache does not hold (the
  provider rotated its keys: no restart), at most once per ``refetch_seconds`` however many such
  tokens arrive (a flood of made-up ``kid`` values costs one fetch), and after ``max_age_seconds``
  in any case (a key the provider withdrew stops being accepted). One fetch at a time: requests
  that need it wait for the same one.
* A provider that does not answer: the cached keys keep working; with none cached yet, requests
  get :class:`ProviderUnavailable` (503), and the next attempt waits a second at least.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from jwt import PyJWK
from jwt.exceptions import PyJWKError

__all__ = ["IssuerKeys", "ProviderUnavailable", "UnknownKey", "get_json", "key_for", "metadata_urls"]

log = logging.getLogger("adapter.auth")

MAX_DOCUMENT_BYTES = 1024 * 1024
RETRY_AFTER_FAILURE_SECONDS = 1.0

# Which key types may verify which algorithms (the header's `alg` must fit the key it names).
_FITS = {
    "RSA": {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"},
    "EC": {"ES256", "ES384", "ES512"},
    "OKP": {"EdDSA"},
}
_CURVE = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}


class ProviderUnavailable(Exception):
    """The identity provider (metadata, keys or introspection) did not answer usably (503)."""


class UnknownKey(Exception):
    """The token names a key the issuer does not publish (or names none while it has several)."""


def _url_allowed(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" or (
        parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")
    )


async def get_json(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    """GET a JSON object from the provider; any failure is :class:`ProviderUnavailable`."""
    if not _url_allowed(url):
        raise ProviderUnavailable(f"refusing to fetch {url}: https only (http only on loopback)")
    try:
        response = await http.get(url, headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        raise ProviderUnavailable(f"{url}: {type(exc).__name__}") from None
    if response.status_code != 200 or len(response.content) > MAX_DOCUMENT_BYTES:
        raise ProviderUnavailable(f"{url}: HTTP {response.status_code}")
    try:
        body = response.json()
    except ValueError:
        raise ProviderUnavailable(f"{url}: not JSON") from None
    if not isinstance(body, dict):
        raise ProviderUnavailable(f"{url}: not a JSON object")
    return body


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: OpenID Connect discovery first, then RFC 8414."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    return [
        f"{origin}{path}/.well-known/openid-configuration",
        f"{origin}/.well-known/oauth-authorization-server{path}",
    ]


class IssuerKeys:
    """The signing keys of one issuer, as the verifier asks for them (``await keys.key(kid, alg)``)."""

    def __init__(
        self,
        issuer: str,
        http: Callable[[], httpx.AsyncClient],
        *,
        refetch_seconds: float,
        max_age_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self._http = http
        self._refetch = refetch_seconds
        self._max_age = max_age_seconds
        self._clock = clock
        self._jwks_uri: str | None = None
        self._jwks: dict[str, dict[str, Any]] = {}  # kid ("" for a key without one) -> JWK
        self._prepared: dict[tuple[str, str], PyJWK] = {}
        self._fetched_at: float | None = None  # last successful fetch
        self._failed_at: float | None = None  # last failed attempt
        self._lock: anyio.Lock | None = None
        self.fetches = 0  # key-set fetches so far (the tests read it, the logs say it)

    async def key(self, kid: str | None, alg: str) -> PyJWK:
        """The key ``kid`` names, prepared for ``alg``; fetches the set when it must (see above)."""
        jwk = self._cached(kid)
        if jwk is None or self._stale():
            jwk = await self._refresh_for(kid)
        kid_alg = (str(jwk.get("kid", "")), alg)
        prepared = self._prepared.get(kid_alg)
        if prepared is None:
            prepared = self._prepared[kid_alg] = key_for(jwk, alg)
        return prepared

    async def warm_up(self) -> None:
        """Fetch the keys once at start-up so the first request does not wait (failures are logged)."""
        try:
            await self._refresh_for(None)
        except (ProviderUnavailable, UnknownKey) as exc:
            log.warning("identity provider keys not loaded at start-up: %s", exc)

    # --- the cache -----------------------------------------------------------------------------

    def _cached(self, kid: str | None) -> dict[str, Any] | None:
        if kid is not None:
            return self._jwks.get(kid)
        return next(iter(self._jwks.values())) if len(self._jwks) == 1 else None

    def _stale(self) -> bool:
        return self._fetched_at is not None and self._clock() - self._fetched_at >= self._max_age

    def _may_fetch(self) -> bool:
        now = self._clock()
        if self._failed_at is not None and now - self._failed_at < min(
            RETRY_AFTER_FAILURE_SECONDS, self._refetch
        ):
            return False
        return self._fetched_at is None or now - self._fetched_at >= self._refetch or self._stale()

    async def _refresh_for(self, kid: str | None) -> dict[str, Any]:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            jwk = self._cached(kid)
            if (jwk is None or self._stale()) and self._may_fetch():
                try:
                    await self._fetch()
                except ProviderUnavailable:
                    self._failed_at = self._clock()
                    if not self._jwks:
                        raise
                    log.warning("identity provider keys not refreshed; using the cached ones")
                jwk = self._cached(kid)
        if jwk is None:
            if not self._jwks:
                raise ProviderUnavailable("no keys of the issuer loaded yet")
            raise UnknownKey("the token names a key the issuer does not publish")
        return jwk

    async def _fetch(self) -> None:
        http = self._http()
        if self._jwks_uri is None:
            self._jwks_uri = await self._discover(http)
        try:
            document = await get_json(http, self._jwks_uri)
        except ProviderUnavailable:
            self._jwks_uri = None  # the metadata may have moved it: look again next time
            raise
        keys = document.get("keys")
        if not isinstance(keys, list):
            raise ProviderUnavailable(f"{self._jwks_uri}: no 'keys' list")
        jwks = {
            str(k.get("kid", "")): k
            for k in keys
            if isinstance(k, dict) and k.get("use", "sig") == "sig" and k.get("kty") in _FITS
        }
        self._jwks, self._prepared = jwks, {}
        self._fetched_at, self._failed_at = self._clock(), None
        self.fetches += 1
        log.info("identity provider keys loaded: %d key(s), fetch %d", len(jwks), self.fetches)

    async def _discover(self, http: httpx.AsyncClient) -> str:
        last: ProviderUnavailable | None = None
        for url in metadata_urls(self.issuer):
            try:
                metadata = await get_json(http, url)
            except ProviderUnavailable as exc:
                last = exc
                continue
            if metadata.get("issuer") != self.issuer:
                raise ProviderUnavailable(
                    f"{url} names issuer {metadata.get('issuer')!r}, not {self.issuer!r}"
                )
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str):
                raise ProviderUnavailable(f"{url} names no jwks_uri")
            return jwks_uri
        raise last or ProviderUnavailable("no metadata")


def key_for(jwk: dict[str, Any], alg: str) -> PyJWK:
    """The key as PyJWT verifies with it, bound to ``alg``, which must fit the key: its type (and
    curve), and the ``alg`` the key itself declares, if it does (UnknownKey otherwise)."""
    declared = jwk.get("alg")
    fits = alg in _FITS.get(str(jwk.get("kty")), set())
    if alg in _CURVE:
        fits = fits and jwk.get("crv") == _CURVE[alg]
    if not fits or (declared is not None and declared != alg):
        raise UnknownKey(f"the key the token names is not for {alg}")
    try:
        return PyJWK(jwk, algorithm=alg)
    except PyJWKError:
        raise UnknownKey("the issuer's key cannot be read") from None
