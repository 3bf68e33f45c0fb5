"""The public surface of ``adapter.host`` is pinned: a change to it must be a decision, not an accident.

Like tests/unit/test_public_surface.py does for the server: every public name and the module it lives
in, and the parameters callers rely on. If a test here fails because you changed the surface on
purpose, update the pin together with docs/host-kit.md.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import pytest

import adapter.host

SURFACE = {
    "AuditEvent": "adapter.host.audit",
    "AuditLog": "adapter.host.audit",
    "AuthorizationCode": "adapter.host.oauth",
    "CacheKey": "adapter.host.cache",
    "Call": "adapter.host.lifecycle",
    "CallHandle": "adapter.host.handle",
    "CallState": "adapter.host.lifecycle",
    "CapabilityKey": "adapter.host.registry",
    "ClientCredentials": "adapter.host.oauth",
    "ConsentRequest": "adapter.host.consent",
    "ContextItem": "adapter.host.context",
    "ContextLedger": "adapter.host.context",
    "ContextLimits": "adapter.host.context",
    "ContextPolicy": "adapter.host.context",
    "CorrelationError": "adapter.host.errors",
    "Diff": "adapter.host.registry",
    "DiscoveryReport": "adapter.host.discovery",
    "ElicitationHandler": "adapter.host.elicit",
    "Entry": "adapter.host.registry",
    "FollowUp": "adapter.host.lifecycle",
    "Host": "adapter.host.host",
    "HostError": "adapter.host.errors",
    "IllegalTransition": "adapter.host.errors",
    "IntegrationContract": "adapter.host.contract",
    "MemoryTokenStore": "adapter.host.oauth",
    "ModelResult": "adapter.host.model",
    "ModelTool": "adapter.host.model",
    "ModelToolset": "adapter.host.model",
    "OAuth": "adapter.host.oauth",
    "OperationStatus": "adapter.host.policy",
    "Origin": "adapter.host.context",
    "Policy": "adapter.host.policy",
    "PolicyDenied": "adapter.host.errors",
    "PreApproval": "adapter.host.consent",
    "PreApprovals": "adapter.host.consent",
    "Principal": "adapter.host.connection",
    "ProbeSchedule": "adapter.host.host",
    "Question": "adapter.host.elicit",
    "Recheck": "adapter.host.contract",
    "Registry": "adapter.host.registry",
    "ResultCache": "adapter.host.cache",
    "Retention": "adapter.host.policy",
    "Risk": "adapter.host.policy",
    "ServerFailed": "adapter.host.errors",
    "ServerFailure": "adapter.host.discovery",
    "ServerInstructions": "adapter.host.host",
    "ServerRule": "adapter.host.policy",
    "ServerSpec": "adapter.host.connection",
    "SignIn": "adapter.host.oauth",
    "SignInHandler": "adapter.host.oauth",
    "StatusAction": "adapter.host.lifecycle",
    "StatusResolver": "adapter.host.policy",
    "StatusVerdict": "adapter.host.policy",
    "StdioServer": "adapter.host.connection",
    "TokenKey": "adapter.host.oauth",
    "TokenStore": "adapter.host.oauth",
    "TraceContext": "adapter.host.audit",
    "TransportDecision": "adapter.host.connection",
    "Trust": "adapter.host.policy",
    "UnknownCapability": "adapter.host.errors",
    "Watch": "adapter.host.watch",
    "WireGuard": "adapter.host.wire",
    "WireJournal": "adapter.host.wire",
    "WireRecord": "adapter.host.wire",
    "adapter_abort": "adapter.host.policy",
    "adapter_running": "adapter.host.policy",
    "adapter_unknown": "adapter.host.policy",
    "contract_fingerprint": "adapter.host.registry",
    "contract_of": "adapter.host.contract",
    "diff_contracts": "adapter.host.contract",
    "fingerprint": "adapter.host.registry",
    "model_name": "adapter.host.model",
    "redact_pattern": "adapter.host.context",
    "watch": "adapter.host.watch",
}

SIGNATURES = {
    "Host": [
        "servers",
        "policy",
        "*consent",
        "*elicitation=None",
        "*audit=None",
        "*probes=None",
        "*cache=None",
        "*pre_approvals=None",
        "*discovery_attempts=3",
    ],
    "Host.call": [
        "principal",
        "name",
        "arguments=None",
        "*trace=None",
        "*on_progress=None",
        "*deadline_seconds=None",
    ],
    "Host.start": [
        "principal",
        "name",
        "arguments=None",
        "*trace=None",
        "*on_progress=None",
        "*deadline_seconds=None",
    ],
    "Host.discover": ["principal"],
    "Host.resolve": ["principal", "call"],
    "Host.follow": ["principal", "call", "*deadline_seconds=None"],
    "CallHandle.follow": ["*deadline_seconds=None"],
    "CallHandle.cancel": ["reason='cancelled by the user'"],
    "OperationStatus": ["tool='get_operation_status'", "wait_seconds=None"],
    "ServerSpec": [
        "id",
        "url=None",
        "credentials=<factory>",
        "server_name=None",
        "timeout_seconds=30.0",
        "wrap_transport=None",
        "transport=None",
        "stdio=None",
        "require_era=None",
        "*tasks=False",
        "*oauth=None",
    ],
    "OAuth": ["issuer", "services=<factory>", "users=None", "store=<factory>"],
    "ClientCredentials": ["client_id", "client_secret", "auth_method='client_secret_basic'"],
    "AuthorizationCode": ["client_id", "redirect_uri", "sign_in"],
    "SignIn": ["server", "principal", "url", "scopes"],
    "TokenKey": ["server", "principal"],
    "TokenStore.get_tokens": ["key"],
    "TokenStore.set_tokens": ["key", "tokens"],
    "ServerRule": [
        "principals",
        "tools=None",
        "risk=<factory>",
        "consent_parameters=<factory>",
        "idempotency_argument='idempotency_key'",
        "status=None",
        "url_domains=<factory>",
        "unknown_when=None",
        "running_when=None",
        "tenants=None",
        "trust=<Trust.INTERNAL: 'internal'>",
        "recheck_contract=True",
        "retention=<Retention.STANDARD: 'standard'>",
        "*stop_with=None",
    ],
    "Principal": ["id", "tenant"],
    "ModelToolset": ["host", "principal", "context=<factory>"],
    "watch": ["host", "server", "principal", "uris=()", "attempts=20"],
    "contract_of": ["host", "server"],
}

"""Parameters callers may rely on, in order: ``*name`` is keyword-only; a new keyword-only parameter
with a default breaks nobody and is allowed after them."""


def test_all_lists_exactly_the_pinned_names() -> None:
    assert sorted(adapter.host.__all__) == sorted(SURFACE)
    assert set(adapter.host.__all__) <= set(dir(adapter.host))


@pytest.mark.parametrize("name", sorted(SURFACE))
def test_each_public_name_is_the_object_of_its_home_module(name: str) -> None:
    home = sys.modules.get(SURFACE[name]) or __import__(SURFACE[name], fromlist=[name])
    assert getattr(adapter.host, name) is getattr(home, name)


def _described(parameter: inspect.Parameter) -> str:
    kinds = {inspect.Parameter.KEYWORD_ONLY: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    default = "" if parameter.default is inspect.Parameter.empty else f"={parameter.default!r}"
    return f"{kinds.get(parameter.kind, '')}{parameter.name}{default}"


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_the_public_callables_keep_the_parameters_callers_use(name: str) -> None:
    target: Any = adapter.host
    for part in name.split("."):
        target = getattr(target, part)
    parameters = [p for p in inspect.signature(target).parameters.values() if p.name != "self"]
    pinned = SIGNATURES[name]
    assert [_described(p) for p in parameters[: len(pinned)]] == pinned
    for extra in parameters[len(pinned) :]:
        assert extra.kind is inspect.Parameter.KEYWORD_ONLY and extra.default is not inspect.Parameter.empty


def test_the_call_states_are_the_seeds_request_states() -> None:
    states = [s.value for s in adapter.host.CallState]
    assert states == [
        "planned",
        "sent",
        "running",
        "input_required",
        "cancelled",
        "completed",
        "failed",
        "outcome_unknown",
    ]
