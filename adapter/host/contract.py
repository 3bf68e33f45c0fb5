"""The integration contract of one server, as one artifact in code whose diff names the checks to redo.

The seed asks for the boundaries of each integration to be written down where code and tests see them:
the stable server id, the protocol versions, the allowed capabilities, the principal binding, the cache
scope, the consent class, the timeout and the behaviour on an unknown outcome (plus, here, the
transport decision, the trust level and the retention class). :func:`contract_of` reads them from the
host's configuration and what it learnt; :meth:`IntegrationContract.to_json` gives the form to keep
in a repository; :func:`diff_contracts` compares two and says, per changed field, which policy and UX
checks are due again, so a growing set of servers stays operable without a new capability silently
inheriting the rights and context of the ones before it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from adapter.host.policy import Risk

if TYPE_CHECKING:
    from adapter.host.connection import ServerSpec
    from adapter.host.host import Host

CACHE_SCOPE = "private per principal and tenant; public shared only after a policy and credential check"
__all__ = ["CHECKS", "IntegrationContract", "Recheck", "contract_of", "diff_contracts"]

CHECKS: dict[str, tuple[str, ...]] = {
    "endpoint": (
        "identity: confirm the new endpoint is the same operator's server",
        "security review of the route",
    ),
    "transport": ("transport decision: operator, update path, principal, network path, lifecycle",),
    "versions": ("era semantics: re-run the tests of the compatibility path", "capability declarations"),
    "declared_name": ("identity: the server's declared name is checked against this pin",),
    "capabilities": (
        "policy: allowlist review of every offered tool",
        "UX: what the model and user are shown",
    ),
    "tools": ("policy: risk class and approval of each changed tool", "UX: consent texts and parameters"),
    "principal_binding": ("policy: who may use the server, in which tenants", "credential provisioning"),
    "cache_scope": ("isolation: what may be cached for whom", "retention of cached data"),
    "retention": ("data protection: how long cached data is kept",),
    "consent": ("UX: consent prompts for each effect", "pre-approval rules"),
    "timeout": ("UX: how long the user waits; deadlines passed to the server",),
    "unknown_outcome": ("UX: the status action shown for an unknown outcome", "operations: reconciliation"),
    "trust": ("context policy: budgets and block types", "risk defaults (hints believed or not)"),
}


@dataclass(frozen=True)
class Recheck:
    """One changed field of a contract and the checks it calls for."""

    field: str
    before: Any
    after: Any
    checks: tuple[str, ...]


@dataclass(frozen=True)
class IntegrationContract:
    server_id: str
    endpoint: str
    transport: dict[str, str]
    versions: tuple[str, ...]
    declared_name: str | None
    capabilities: tuple[str, ...]  # the allowlist, or ("*",) for every tool
    tools: dict[str, str]  # the approved tools' contract fingerprints
    principal_binding: dict[str, Any]
    cache_scope: str
    retention: str
    consent: dict[str, str]  # tool -> risk class (read: none; write, destructive: asked each time)
    timeout_seconds: float
    unknown_outcome: str
    trust: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, default=list)

    @classmethod
    def from_json(cls, text: str) -> IntegrationContract:
        data = json.loads(text)
        data["versions"], data["capabilities"] = tuple(data["versions"]), tuple(data["capabilities"])
        return cls(**data)


def contract_of(host: Host, server: str) -> IntegrationContract:
    """The contract in force for ``server`` now: the host's configuration and what it learnt."""
    spec, rule = host.servers[server], host.policy.rule(server)
    entries = [e for e in host.registry.entries.values() if e.key.server == server]
    versions: tuple[str, ...] = (spec.learnt.version,) if spec.learnt is not None else ()
    if spec.require_era is not None:
        versions = (*versions, f"required era: {spec.require_era}")
    transport = asdict(spec.transport) if spec.transport is not None else {}
    transport["kind"] = "stdio" if spec.stdio is not None else "streamable-http"
    status = rule.status.tool if rule.status is not None else None
    return IntegrationContract(
        server_id=server,
        endpoint=spec.endpoint,
        transport=transport,
        versions=versions,
        declared_name=spec.server_name,
        capabilities=tuple(sorted(rule.tools)) if rule.tools is not None else ("*",),
        tools={e.key.name: e.fingerprint for e in sorted(entries, key=lambda e: e.key) if e.approved},
        principal_binding={
            "principals": sorted(rule.principals),
            "tenants": sorted(rule.tenants) if rule.tenants is not None else "any",
            "credentials": _credentials_of(spec),
        },
        cache_scope=CACHE_SCOPE,
        retention=rule.retention.value,
        consent={
            e.key.name: host.policy.risk_of(server, e.tool).value
            for e in sorted(entries, key=lambda e: e.key)
        },
        timeout_seconds=spec.timeout_seconds,
        unknown_outcome=f"status tool {status}"
        if status
        else "no status tool: the application decides; never resent",
        trust=rule.trust.value,
    )


def _credentials_of(spec: ServerSpec) -> str:
    if spec.stdio is not None:
        return "stdio child environment"
    if spec.oauth is not None:
        return f"OAuth token per principal from {spec.oauth.issuer}"
    return "bearer token per principal"


def diff_contracts(before: IntegrationContract, after: IntegrationContract) -> list[Recheck]:
    """What changed between two contracts of one server, each with the checks to redo."""
    old, new = asdict(before), asdict(after)
    changes = []
    for name in sorted(old):
        if old[name] != new[name] and name != "server_id":
            checks = CHECKS.get(name, ("review",))
            if name == "consent" and any(v != Risk.READ.value for v in new[name].values()):
                checks = (*checks, "risk: a tool whose class changed needs a fresh look")
            changes.append(Recheck(name, old[name], new[name], checks))
    return changes
