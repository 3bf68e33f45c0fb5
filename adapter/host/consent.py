"""Consent a person can decide on, and narrow pre-approvals for low-risk repeats.

A consent request shows what matters for the decision: which server (by the host's id), which action
and its effect, and only the parameters named for it (a list shows as its length, not its records).
It also carries the contract fingerprint, the call id and the trace id, so an application rule can
notice that the contract changed since the user last said yes, and the audit can tie the answer to
the call. Every effect is asked about on its own: there is no request that covers two calls.

A :class:`PreApproval` lets a repeated low-risk action (risk ``write``, never ``destructive``) pass
without asking, within bounds: one principal, one server, one tool, the contract fingerprint the user
saw, and a predicate per bounded parameter. A request for another server or tool is simply not
covered; a parameter outside its bound is asked about; a changed contract revokes the rule.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adapter.host.connection import Principal
from adapter.host.policy import Risk

__all__ = ["ConsentCallback", "ConsentRequest", "PreApproval", "PreApprovals"]


@dataclass(frozen=True)
class ConsentRequest:
    """What the user sees before an effectful call: origin, action, effect and the parameters that matter."""

    server: str
    principal: str
    tool: str
    qualified: str
    risk: Risk
    parameters: dict[str, Any]
    effect: str = ""
    fingerprint: str = ""
    call_id: str = ""
    trace_id: str = ""
    tenant: str = ""

    def summary(self) -> str:
        shown = ", ".join(f"{k}={_short(v)}" for k, v in self.parameters.items())
        return f"[{self.server}] {self.tool}({shown}) - {self.risk.value}"


def _short(value: Any, limit: int = 60) -> str:
    if isinstance(value, list | tuple):
        return f"<{len(value)} items>"
    if isinstance(value, dict):
        return f"<{len(value)} fields>"
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


ConsentCallback = Callable[[ConsentRequest], Awaitable[bool]]


@dataclass
class PreApproval:
    """One narrow rule: ``bounds`` maps a parameter to a predicate its value must satisfy; a parameter
    without a bound must be absent. ``uses`` (None: unlimited) counts down with each covered call."""

    principal: Principal
    server: str
    tool: str
    fingerprint: str
    bounds: Mapping[str, Callable[[Any], bool]] = field(default_factory=dict)
    uses: int | None = None

    def covers(self, request: ConsentRequest, arguments: Mapping[str, Any], ignored: set[str]) -> bool:
        if (request.server, request.tool) != (self.server, self.tool):
            return False
        if (request.principal, request.tenant) != (self.principal.id, self.principal.tenant):
            return False
        if request.risk is not Risk.WRITE or self.uses == 0:
            return False
        for name, value in arguments.items():
            if name in ignored:
                continue
            bound = self.bounds.get(name)
            if bound is None or not bound(value):
                return False
        return True


@dataclass
class PreApprovals:
    """The host's pre-approval rules, and why each one that is gone went (for the application)."""

    rules: list[PreApproval] = field(default_factory=list)
    revoked: list[tuple[PreApproval, str]] = field(default_factory=list)

    def grant(self, rule: PreApproval) -> None:
        self.rules.append(rule)

    def match(
        self, request: ConsentRequest, arguments: Mapping[str, Any], ignored: set[str]
    ) -> PreApproval | None:
        """The rule covering this request (its use counted), or None: then the user is asked."""
        for rule in list(self.rules):
            same_action = (rule.server, rule.tool) == (request.server, request.tool)
            if same_action and rule.fingerprint != request.fingerprint:
                self.revoke(rule, "the tool's contract changed")
                continue
            if rule.covers(request, arguments, ignored):
                if rule.uses is not None:
                    rule.uses -= 1
                return rule
        return None

    def revoke_server(self, server: str, tools: set[str], why: str) -> None:
        for rule in list(self.rules):
            if rule.server == server and rule.tool in tools:
                self.revoke(rule, why)

    def revoke(self, rule: PreApproval, why: str) -> None:
        if rule in self.rules:
            self.rules.remove(rule)
            self.revoked.append((rule, why))
