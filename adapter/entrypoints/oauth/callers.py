"""Who a verified token says the caller is: the principal and tenant, or an operator's role.

* **MCP callers**: the principal from ``ADAPTER_OAUTH_PRINCIPAL_CLAIM`` (``sub`` by default), the
  tenant from ``ADAPTER_OAUTH_TENANT_CLAIM`` (``tenant``; ``iss`` for a single-tenant deployment,
  since every token has one). A token without either is refused, naming the claim it lacks. The
  result is the kit's one :class:`~adapter.domain.identity.Principal`, inside a
  :class:`~adapter.entrypoints.mcp.identity.CallerToken`: handles, operations, cursors, confirmation
  state and everything else bound to a principal work exactly as with the token file.
* **Operators** (the admin API and dashboard): ``ADAPTER_OAUTH_ROLES_CLAIM`` (``scope`` by default:
  the token's scopes) holding ``ADAPTER_OAUTH_OPERATOR_ROLE`` (may act, and see) or
  ``ADAPTER_OAUTH_VIEWER_ROLE`` (may see). No tenant is needed: operators see every tenant.

A claim name is looked up as written first; if there is no such claim and the name has dots, it is
followed as a path (``realm_access.roles`` for Keycloak's realm roles), so URL-style claim names
(``https://example.com/tenant``) work too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from adapter.config import Settings
from adapter.domain.identity import Principal
from adapter.domain.text import is_storable
from adapter.entrypoints.mcp.identity import CallerToken
from adapter.entrypoints.oauth.verify import TokenRefused, VerifiedToken

__all__ = ["ClaimRules", "Role", "claim"]

MAX_NAME = 200  # the store's principal and tenant columns

Role = Literal["operator", "viewer"]


def claim(claims: Mapping[str, Any], name: str) -> Any:
    """The claim ``name``, or the value at its dotted path, or None."""
    if name in claims:
        return claims[name]
    if "." not in name:
        return None
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _name(value: Any) -> str | None:
    """A claim value usable as a principal or tenant name: text (or a number), storable, bounded."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value)
    if not text or len(text) > MAX_NAME or not is_storable(text):
        return None
    return text


def _values(value: Any) -> set[str]:
    """A roles claim: a list of strings or one space-separated string."""
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list):
        return {item for item in value if isinstance(item, str)}
    return set()


@dataclass(frozen=True, slots=True)
class ClaimRules:
    issuer: str
    principal_claim: str
    tenant_claim: str
    roles_claim: str
    operator_role: str
    viewer_role: str

    @classmethod
    def from_settings(cls, settings: Settings) -> ClaimRules:
        assert settings.oauth_issuer is not None
        return cls(
            issuer=settings.oauth_issuer,
            principal_claim=settings.oauth_principal_claim,
            tenant_claim=settings.oauth_tenant_claim,
            roles_claim=settings.oauth_roles_claim,
            operator_role=settings.oauth_operator_role,
            viewer_role=settings.oauth_viewer_role,
        )

    def caller(self, verified: VerifiedToken) -> CallerToken:
        """The MCP caller a token names; TokenRefused when it names no usable principal or tenant."""
        subject = _name(claim(verified.claims, self.principal_claim))
        if subject is None:
            raise TokenRefused(f"the token has no usable '{self.principal_claim}' claim (the principal)")
        tenant = _name(claim(verified.claims, self.tenant_claim))
        if tenant is None:
            raise TokenRefused(f"the token names no tenant: no usable '{self.tenant_claim}' claim")
        principal = Principal(subject=subject, tenant=tenant)
        return CallerToken(
            token=verified.token,
            client_id=verified.client_id or f"{tenant}/{subject}",
            scopes=list(verified.scopes),
            expires_at=verified.expires_at,
            subject=subject,
            claims={"iss": self.issuer, "tenant": tenant},
            principal=principal,
        )

    def role(self, verified: VerifiedToken) -> tuple[Role, str] | None:
        """The operator role a token grants and who holds it (``sub``), or None."""
        held = (
            set(verified.scopes)
            if self.roles_claim in ("scope", "scp")
            else _values(claim(verified.claims, self.roles_claim))
        )
        role: Role | None = (
            "operator" if self.operator_role in held else "viewer" if self.viewer_role in held else None
        )
        if role is None:
            return None
        who = _name(claim(verified.claims, "sub")) or verified.client_id or "unknown"
        return role, who
