"""FastAPI dependencies of the admin side: the operator's identity and role, and the services.

Two roles: ``operator`` (ADAPTER_ADMIN_TOKEN, may act) and ``viewer``
(ADAPTER_ADMIN_READONLY_TOKEN, GET only). The token comes as ``Authorization: Bearer``; the
dashboard in a browser instead sends the ``adapter_admin`` cookie set by the login form, which holds
a server-side session id (adapter/services/operator_sessions.py), never the token. In
resource-server mode an access token of the identity provider may grant either role too
(``provider.py`` checks it before these dependencies run). No credential or a wrong one is 401; a
viewer acting is 403; with no admin token configured and no identity provider, /admin does not
exist (404).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, HTTPException, Request, status

from adapter.config import Settings
from adapter.services.admin import AdminService
from adapter.services.operator_sessions import LoginThrottle, OperatorSessions

__all__ = [
    "COOKIE",
    "PROVIDER_IDENTITY",
    "Admin",
    "Identity",
    "Operator",
    "Viewer",
    "admin_enabled",
    "admin_of",
    "identify",
    "identify_request",
    "login_throttle_of",
    "require_enabled",
    "sessions_of",
    "settings_of",
    "token_of",
]

COOKIE = "adapter_admin"
PROVIDER_IDENTITY = "adapter_provider_identity"  # request state: the role a provider token grants
Role = Literal["operator", "viewer"]


@dataclass(frozen=True, slots=True)
class Identity:
    role: Role
    actor: str  # what the audit trail records: the role (and a provider token's subject), never the token


def admin_enabled(settings: Settings) -> bool:
    return bool(settings.admin_token or settings.admin_readonly_token or settings.resource_server)


def identify(settings: Settings, token: str | None) -> Identity | None:
    if not token:
        return None
    for role, expected in (("operator", settings.admin_token), ("viewer", settings.admin_readonly_token)):
        if expected and hmac.compare_digest(expected.encode(), token.encode()):
            return Identity(role=role, actor=role)  # type: ignore[arg-type]
    return None


def token_of(request: Request) -> str | None:
    """The bearer token of the Authorization header (the cookie is a session, not a token)."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return None


def sessions_of(request: Request) -> OperatorSessions:
    return request.app.state.operator_sessions  # type: ignore[no-any-return]


def login_throttle_of(request: Request) -> LoginThrottle:
    return request.app.state.login_throttle  # type: ignore[no-any-return]


def identify_request(request: Request) -> Identity | None:
    """Who is asking: the bearer token if one is sent, else the dashboard session of the cookie.

    A session's role counts only while that role's token is still configured: removing the token
    (and restarting) ends its sessions too.
    """
    settings = settings_of(request)
    token = token_of(request)
    if token is not None:
        return identify(settings, token) or _provider_identity(request)
    role = sessions_of(request).role_of(request.cookies.get(COOKIE))
    configured = {"operator": settings.admin_token, "viewer": settings.admin_readonly_token}
    if role is not None and configured.get(role):
        return Identity(role=role, actor=role)  # type: ignore[arg-type]
    return None


def _provider_identity(request: Request) -> Identity | None:
    """The role an identity provider's token grants (found by ``provider.ProviderOperators``)."""
    found = request.scope.get("state", {}).get(PROVIDER_IDENTITY)
    return found if isinstance(found, Identity) else None


def settings_of(request: Request) -> Settings:
    return request.app.state.kit.settings  # type: ignore[no-any-return]


def admin_of(request: Request) -> AdminService:
    return request.app.state.kit.admin  # type: ignore[no-any-return]


def require_enabled(request: Request) -> Settings:
    """The settings, or 404 for every admin path when no admin token is configured."""
    settings = settings_of(request)
    if not admin_enabled(settings):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "Not Found")
    return settings


def require_viewer(request: Request) -> Identity:
    require_enabled(request)
    identity = identify_request(request)
    if identity is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "a valid admin token is required",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return identity


def require_operator(request: Request, identity: Annotated[Identity, Depends(require_viewer)]) -> Identity:
    """An operator acting through the API. Actions need the Authorization header: a browser sends
    the dashboard's cookie by itself, so a cookie alone must not be able to act here (the dashboard's
    own forms carry their CSRF check)."""
    if identity.role != "operator":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "viewers may look but not act")
    if not request.headers.get("authorization", "").lower().startswith("bearer "):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "actions need the operator token in the Authorization header",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return identity


Viewer = Annotated[Identity, Depends(require_viewer)]
Operator = Annotated[Identity, Depends(require_operator)]
Admin = Annotated[AdminService, Depends(admin_of)]
