"""The host's policy: which servers and tools a principal may use, and how risky each tool is.

Server annotations (``readOnlyHint``, ``destructiveHint``) are hints from across a trust boundary; the
host's own rule decides. The policy is consulted at call time and again before every cache hit, so a
right withdrawn while a cached result is still fresh takes effect at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from mcp_types import Tool

from adapter.host.connection import Principal
from adapter.host.errors import PolicyDenied

__all__ = [
    "OperationStatus",
    "Policy",
    "Retention",
    "Risk",
    "ServerRule",
    "StatusResolver",
    "StatusVerdict",
    "Trust",
    "adapter_abort",
    "adapter_running",
    "adapter_unknown",
]


class Risk(StrEnum):
    READ = "read"  # no effect: no consent, no idempotency key
    WRITE = "write"  # an effect: consent before each call, a host-made idempotency key
    DESTRUCTIVE = "destructive"  # as WRITE; the consent prompt says it cannot simply be undone


class Trust(StrEnum):
    """How far the host trusts a server; each level has its own context limits (adapter.host.context).

    ``trusted``: operated by the host's own people; its hints inform the risk default. ``internal``
    (the default): as trusted, with a smaller context budget. ``untrusted``: a third party; its hints
    are ignored (every tool is an effect unless the host's rule says otherwise), its context budget is
    the smallest, and no pre-approval covers its tools.
    """

    TRUSTED = "trusted"
    INTERNAL = "internal"
    UNTRUSTED = "untrusted"


class Retention(StrEnum):
    """How long cached data of a server may be kept at most, whatever its ``ttlMs`` says."""

    NONE = "none"  # never stored
    SHORT = "short"  # one minute
    STANDARD = "standard"  # one hour
    LONG = "long"  # one day


RETENTION_SECONDS = {
    Retention.NONE: 0.0,
    Retention.SHORT: 60.0,
    Retention.STANDARD: 3600.0,
    Retention.LONG: 86400.0,
}


@dataclass(frozen=True)
class StatusVerdict:
    """The server's word on an unknown outcome: applied (True), not applied (False) or still unknown.

    ``running``: not decided because the server is still working on it (the call is ``running``,
    not ``outcome_unknown``). ``stopped``: not applied because it was stopped before it took effect
    (the call ends ``cancelled``, not ``failed``).
    """

    applied: bool | None
    server_status: str
    operation_id: str | None = None
    running: bool = False
    stopped: bool = False


class StatusResolver(Protocol):
    """Resolves an unknown outcome through the server's own status tool (never by resending)."""

    @property
    def tool(self) -> str: ...

    def arguments(self, idempotency_key: str | None, operation_id: str | None) -> dict[str, Any] | None:
        """The status tool's arguments, or None when there is nothing to ask by (no action is offered)."""
        ...

    def verdict(self, structured: dict[str, Any]) -> StatusVerdict: ...


@dataclass
class ServerRule:
    """Per-server policy. ``tools`` is the allowlist (None: every tool); ``risk`` overrides the hints.

    ``principals`` are user ids, ``tenants`` (None: any) the tenants they may act in here.
    ``unknown_when`` / ``running_when`` read a result the server sent: an outcome it could not observe
    (``outcome_unknown``), or work it is still doing (``in_progress``, with an operation id to follow).
    ``recheck_contract``: before every effect the tool list is read again on the same connection and
    the tool's contract compared with the approved one (the second check the seed asks for).
    ``stop_with`` reads a ``running`` result: the tool and arguments that stop that work on the
    server (``adapter_abort``). The host never runs it by itself, since stopping may be an effect of
    its own (an abort after COMMIT voids the batch): it is offered as ``call.stop_action``, to be
    called like any effect (policy, consent, audit).
    """

    principals: set[str]
    tools: set[str] | None = None
    risk: dict[str, Risk] = field(default_factory=dict)
    consent_parameters: dict[str, tuple[str, ...]] = field(default_factory=dict)
    idempotency_argument: str = "idempotency_key"
    status: StatusResolver | None = None
    url_domains: set[str] = field(default_factory=set)
    unknown_when: Callable[[dict[str, Any]], bool] | None = None
    running_when: Callable[[dict[str, Any]], bool] | None = None
    tenants: set[str] | None = None
    trust: Trust = Trust.INTERNAL
    recheck_contract: bool = True
    retention: Retention = Retention.STANDARD
    stop_with: Callable[[dict[str, Any]], tuple[str, dict[str, Any]] | None] | None = field(
        default=None, kw_only=True
    )


@dataclass
class Policy:
    """All server rules of one host; a server without a rule is not allowed at all."""

    servers: dict[str, ServerRule] = field(default_factory=dict)

    def rule(self, server: str) -> ServerRule:
        rule = self.servers.get(server)
        if rule is None:
            raise PolicyDenied(f"server {server!r} is not on the host's allowlist")
        return rule

    def check_server(self, principal: Principal, server: str) -> ServerRule:
        """The rule for ``server`` if ``principal`` may use it now; raises :class:`PolicyDenied`."""
        rule = self.rule(server)
        if principal.id not in rule.principals:
            raise PolicyDenied(f"{principal.id!r} may not use server {server!r}")
        if rule.tenants is not None and principal.tenant not in rule.tenants:
            raise PolicyDenied(f"{principal.key!r}: tenant {principal.tenant!r} may not use {server!r}")
        return rule

    def allows_tool(self, server: str, tool: str) -> bool:
        rule = self.servers.get(server)
        return rule is not None and (rule.tools is None or tool in rule.tools)

    def check_tool(self, principal: Principal, server: str, tool: str) -> ServerRule:
        rule = self.check_server(principal, server)
        if rule.tools is not None and tool not in rule.tools:
            raise PolicyDenied(f"tool {tool!r} of {server!r} is not on the host's allowlist")
        return rule

    def risk_of(self, server: str, tool: Tool) -> Risk:
        """The host's risk class: its own rule decides; without one, the hints inform a cautious default."""
        rule = self.rule(server)
        override = rule.risk.get(tool.name)
        if override is not None:
            return override
        if rule.trust is Trust.UNTRUSTED:
            return Risk.DESTRUCTIVE  # an untrusted server's hints decide nothing
        hints = tool.annotations
        if hints is not None and hints.read_only_hint is True and hints.destructive_hint is not True:
            return Risk.READ
        if hints is not None and hints.destructive_hint is False:
            return Risk.WRITE
        return Risk.DESTRUCTIVE  # the spec's default for a tool that says nothing


@dataclass(frozen=True)
class OperationStatus:
    """The resolver for this kit's server: ``get_operation_status`` by idempotency key or operation id.

    ``wait_seconds``: ask the server to answer as soon as the status changes, waiting at most that
    long (the server caps it at its own wait budget, 4 s by default); a status that cannot change
    by itself is answered at once. Following a long commit (``CallHandle.follow``) is then a
    long-poll, not a stream of quick questions. Keep it below the server's request timeout.
    """

    tool: str = "get_operation_status"
    wait_seconds: float | None = None

    def arguments(self, idempotency_key: str | None, operation_id: str | None) -> dict[str, Any] | None:
        """By operation id when the server named one, else by the key the host kept; a tool without
        either (``abort_import`` takes no key) cannot be looked up, so it gets no status action."""
        asked: dict[str, Any]
        if operation_id:
            asked = {"operation_id": operation_id}
        elif idempotency_key:
            asked = {"idempotency_key": idempotency_key}
        else:
            return None
        if self.wait_seconds:
            asked["wait_seconds"] = self.wait_seconds
        return asked

    def verdict(self, structured: dict[str, Any]) -> StatusVerdict:
        status = str(structured.get("status"))
        applied: bool | None = None
        if status == "succeeded":
            applied = True
        elif status in ("failed", "cancelled"):
            applied = False
        return StatusVerdict(
            applied,
            status,
            structured.get("operation_id"),
            running=status == "in_progress",
            stopped=status == "cancelled",
        )


def adapter_unknown(structured: dict[str, Any]) -> bool:
    """This kit's server reports an unobserved commit as a result with status ``outcome_unknown``."""
    return structured.get("status") == "outcome_unknown"


def adapter_running(structured: dict[str, Any]) -> bool:
    """This kit's server answers a long commit with status ``in_progress`` and an ``operation_id``."""
    return structured.get("status") == "in_progress" and bool(structured.get("operation_id"))


def adapter_abort(structured: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """How this kit's server stops a commit it runs in the background: ``abort_import`` with the
    import's handle. An abort, not a cancel: before COMMIT nothing lands; after COMMIT the batch
    that landed is voided (an effect of its own, so the host offers it and never runs it itself)."""
    handle = structured.get("handle")
    return ("abort_import", {"handle": handle}) if isinstance(handle, str) and handle else None
