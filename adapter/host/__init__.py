"""The host kit: a client library for applications that use one or many MCP servers safely.

It speaks MCP only (the SDK's ``Client``) and imports nothing else from ``adapter``, so it works with
any server. See docs/host-kit.md.
"""

from adapter.host.audit import AuditEvent, AuditLog, TraceContext
from adapter.host.cache import CacheKey, ResultCache
from adapter.host.connection import Principal, ServerSpec
from adapter.host.elicit import ElicitationHandler, Question
from adapter.host.errors import (
    CorrelationError,
    HostError,
    IllegalTransition,
    PolicyDenied,
    UnknownCapability,
)
from adapter.host.host import Host, ProbeSchedule
from adapter.host.lifecycle import Call, CallState, StatusAction
from adapter.host.policy import (
    ConsentRequest,
    OperationStatus,
    Policy,
    Risk,
    ServerRule,
    StatusResolver,
    StatusVerdict,
    adapter_unknown,
)
from adapter.host.registry import CapabilityKey, Diff, Entry, Registry, fingerprint
from adapter.host.watch import Watch, watch
from adapter.host.wire import WireGuard, WireJournal, WireRecord

__all__ = [
    "AuditEvent",
    "AuditLog",
    "CacheKey",
    "Call",
    "CallState",
    "CapabilityKey",
    "ConsentRequest",
    "CorrelationError",
    "Diff",
    "ElicitationHandler",
    "Entry",
    "Host",
    "HostError",
    "IllegalTransition",
    "OperationStatus",
    "Policy",
    "PolicyDenied",
    "Principal",
    "ProbeSchedule",
    "Question",
    "Registry",
    "ResultCache",
    "Risk",
    "ServerRule",
    "ServerSpec",
    "StatusAction",
    "StatusResolver",
    "StatusVerdict",
    "TraceContext",
    "UnknownCapability",
    "Watch",
    "WireGuard",
    "WireJournal",
    "WireRecord",
    "adapter_unknown",
    "fingerprint",
    "watch",
]
