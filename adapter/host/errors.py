"""The host kit's exception tree: one base class, so an application can catch everything the kit raises.

Outcomes of a call (declined, failed, outcome unknown) are *not* exceptions: they are states of a
:class:`~adapter.host.lifecycle.Call`. Exceptions mean the host refused to act or was misused.
"""

from __future__ import annotations

__all__ = [
    "CorrelationError",
    "HostError",
    "IllegalTransition",
    "PolicyDenied",
    "ServerFailed",
    "UnknownCapability",
    "unwrap",
]


class HostError(Exception):
    """Base class of every error the host kit raises."""


class PolicyDenied(HostError):
    """The host's policy (allowlist, risk class, consent, approval) does not allow this action."""


class UnknownCapability(HostError):
    """No active capability by that qualified name or alias (unknown, removed, unapproved or down)."""


class IllegalTransition(HostError):
    """A call lifecycle transition the state machine does not allow (a bug in the caller)."""


class CorrelationError(HostError):
    """A response that belongs to another request id, server or protocol version was rejected."""


class ServerFailed(HostError):
    """A server could not be used: ``kind`` says why, for the discovery report and the probes.

    ``unreachable`` (nothing reached it), ``unavailable`` (5xx, timeouts: passing), ``unauthorized``
    (401/403 for this principal), ``era`` (not the era this host requires or speaks), ``identity``
    (another name than the one configured or pinned), ``no_credentials`` (the host holds none for
    this principal there).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def unwrap(exc: BaseException) -> BaseException:
    """The one exception inside the SDK's task-group wrappers (an exception group of one), or ``exc``."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
