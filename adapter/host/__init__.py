"""The host kit: a client library for applications that use one or many MCP servers safely.

It speaks MCP only (the SDK's ``Client``) and imports nothing else from ``adapter``, so it works with
any server. See docs/host-kit.md; the public names below are pinned by tests/host/test_surface.py.
"""

from adapter.host.audit import AuditEvent, AuditLog, TraceContext
from adapter.host.cache import CacheKey, ResultCache
from adapter.host.connection import Principal, ServerSpec, StdioServer, TransportDecision
from adapter.host.consent import ConsentRequest, PreApproval, PreApprovals
from adapter.host.context import (
    ContextItem,
    ContextLedger,
    ContextLimits,
    ContextPolicy,
    Origin,
    redact_pattern,
)
from adapter.host.contract import IntegrationContract, Recheck, contract_of, diff_contracts
from adapter.host.discovery import DiscoveryReport, ServerFailure
from adapter.host.elicit import ElicitationHandler, Question
from adapter.host.errors import (
    CorrelationError,
    HostError,
    IllegalTransition,
    PolicyDenied,
    ServerFailed,
    UnknownCapability,
)
from adapter.host.handle import CallHandle
from adapter.host.host import Host, ProbeSchedule, ServerInstructions
from adapter.host.lifecycle import Call, CallState, FollowUp, StatusAction
from adapter.host.model import ModelResult, ModelTool, ModelToolset, model_name
from adapter.host.oauth import (
    AuthorizationCode,
    ClientCredentials,
    MemoryTokenStore,
    OAuth,
    SignIn,
    SignInHandler,
    TokenKey,
    TokenStore,
)
from adapter.host.policy import (
    OperationStatus,
    Policy,
    Retention,
    Risk,
    ServerRule,
    StatusResolver,
    StatusVerdict,
    Trust,
    adapter_abort,
    adapter_running,
    adapter_unknown,
)
from adapter.host.registry import CapabilityKey, Diff, Entry, Registry, contract_fingerprint, fingerprint
from adapter.host.watch import Watch, watch
from adapter.host.wire import WireGuard, WireJournal, WireRecord

__all__ = [
    "AuditEvent",
    "AuditLog",
    "AuthorizationCode",
    "CacheKey",
    "Call",
    "CallHandle",
    "CallState",
    "CapabilityKey",
    "ClientCredentials",
    "ConsentRequest",
    "ContextItem",
    "ContextLedger",
    "ContextLimits",
    "ContextPolicy",
    "CorrelationError",
    "Diff",
    "DiscoveryReport",
    "ElicitationHandler",
    "Entry",
    "FollowUp",
    "Host",
    "HostError",
    "IllegalTransition",
    "IntegrationContract",
    "MemoryTokenStore",
    "ModelResult",
    "ModelTool",
    "ModelToolset",
    "OAuth",
    "OperationStatus",
    "Origin",
    "Policy",
    "PolicyDenied",
    "PreApproval",
    "PreApprovals",
    "Principal",
    "ProbeSchedule",
    "Question",
    "Recheck",
    "Registry",
    "ResultCache",
    "Retention",
    "Risk",
    "ServerFailed",
    "ServerFailure",
    "ServerInstructions",
    "ServerRule",
    "ServerSpec",
    "SignIn",
    "SignInHandler",
    "StatusAction",
    "StatusResolver",
    "StatusVerdict",
    "StdioServer",
    "TokenKey",
    "TokenStore",
    "TraceContext",
    "TransportDecision",
    "Trust",
    "UnknownCapability",
    "Watch",
    "WireGuard",
    "WireJournal",
    "WireRecord",
    "adapter_abort",
    "adapter_running",
    "adapter_unknown",
    "contract_fingerprint",
    "contract_of",
    "diff_contracts",
    "fingerprint",
    "model_name",
    "redact_pattern",
    "watch",
]
