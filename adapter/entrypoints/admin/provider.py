"""Operators signed in at the identity provider: the admin API, the dashboard and ``/metrics``
accept the provider's access tokens beside the admin tokens (resource-server mode only).

The dependencies in ``deps.py`` are synchronous and a token check may need the provider (its keys),
so this ASGI layer checks first: for a request under ``/admin`` or to ``/metrics`` whose
``Authorization: Bearer`` token is not one of the admin tokens, it verifies the token as the MCP
endpoint does (signature, issuer, audience, expiry) and leaves the role it grants
(``ADAPTER_OAUTH_ROLES_CLAIM`` holding ``ADAPTER_OAUTH_OPERATOR_ROLE`` or ``..._VIEWER_ROLE``) in
the request's state, where ``identify_request()`` finds it. A refused token grants nothing (the
dependency then answers 401); a provider that does not answer is 503.

The dashboard takes such a token in the ``Authorization`` header of every request (sent by an
authenticating reverse proxy in front of it: the operator's access token for this server's
audience); it does not run the provider's browser sign-in itself, and its login form takes the
admin tokens only.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from adapter.config import Settings
from adapter.entrypoints.admin.deps import PROVIDER_IDENTITY, Identity, identify
from adapter.entrypoints.oauth.guard import bearer_token
from adapter.entrypoints.oauth.keys import ProviderUnavailable
from adapter.entrypoints.oauth.verify import TokenRefused
from adapter.entrypoints.oauth.wiring import ResourceServer

__all__ = ["ProviderOperators"]

_PATHS = ("/admin", "/metrics")
MAX_ACTOR = 200  # the audit trail's actor column


def _checked(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in _PATHS)


class ProviderOperators:
    def __init__(self, app: ASGIApp, *, server: ResourceServer, settings: Settings) -> None:
        self.app = app
        self.server = server
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _checked(scope["path"]):
            token = bearer_token(scope["headers"])
            if token is not None and identify(self.settings, token) is None:
                try:
                    found = await self.server.operator(token)
                except TokenRefused:
                    found = None
                except ProviderUnavailable:
                    await _unavailable(send)
                    return
                if found is not None:
                    role, who = found
                    identity = Identity(role=role, actor=f"{role}:{who}"[:MAX_ACTOR])
                    scope.setdefault("state", {})[PROVIDER_IDENTITY] = identity
        await self.app(scope, receive, send)


async def _unavailable(send: Send) -> None:
    body = json.dumps(
        {"code": "identity_provider_unavailable", "detail": "the identity provider did not answer; try again"}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"5"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
