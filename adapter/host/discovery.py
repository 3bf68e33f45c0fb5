"""What one discovery round found: a diff per server that answered, a failure per server that did not.

One bad server never stops the others: each server is discovered on its own, and its failure stays
its own. It drops out of the offer (for everyone when the server is at fault, for that principal when
their credentials are), is reported here, and is probed back in the background (bounded).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adapter.host.errors import CorrelationError, HostError, PolicyDenied, ServerFailed
from adapter.host.registry import Diff

__all__ = ["DiscoveryReport", "ServerFailure", "failure_from"]

SERVER_AT_FAULT = frozenset({"unreachable", "unavailable", "era", "identity", "protocol"})


@dataclass(frozen=True)
class ServerFailure:
    """Why a server is not offered to a principal: ``kind`` as in :class:`ServerFailed`."""

    server: str
    principal: str  # the principal's key (``alice@acme``)
    kind: str
    reason: str
    probing: bool = False

    @property
    def server_at_fault(self) -> bool:
        """True when it concerns everyone (the server is down or not what it should be)."""
        return self.kind in SERVER_AT_FAULT


@dataclass(frozen=True)
class DiscoveryReport:
    """``diffs`` for the servers that answered, ``failures`` for those that did not."""

    diffs: dict[str, Diff] = field(default_factory=dict)
    failures: dict[str, ServerFailure] = field(default_factory=dict)

    def __getitem__(self, server: str) -> Diff:
        return self.diffs[server]

    @property
    def ok(self) -> bool:
        return not self.failures


def failure_from(server: str, principal: str, exc: BaseException) -> ServerFailure:
    if isinstance(exc, ServerFailed):
        return ServerFailure(server, principal, exc.kind, str(exc))
    if isinstance(exc, CorrelationError):  # another endpoint, name or version answered
        return ServerFailure(server, principal, "identity", str(exc))
    if isinstance(exc, PolicyDenied):
        return ServerFailure(server, principal, "no_credentials", str(exc))
    if isinstance(exc, HostError):
        return ServerFailure(server, principal, "protocol", str(exc))
    return ServerFailure(server, principal, "unavailable", f"{server}: {type(exc).__name__}")
