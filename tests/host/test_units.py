"""The kit's parts on their own: lifecycle, registry diff, cache keys, and its import boundary."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from mcp_types import Tool, ToolAnnotations

from adapter.host import (
    AuditEvent,
    AuditLog,
    Call,
    CallState,
    CapabilityKey,
    IllegalTransition,
    OperationStatus,
    Policy,
    PolicyDenied,
    Principal,
    Registry,
    ResultCache,
    Risk,
    ServerRule,
    UnknownCapability,
    adapter_abort,
)

HOST = Path(__file__).resolve().parents[2] / "adapter" / "host"


def test_the_host_kit_imports_nothing_else_from_adapter() -> None:
    for path in HOST.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path.name}: relative import"
                names = [node.module or ""]
            for name in names:
                if name == "adapter" or name.startswith("adapter."):
                    assert name.startswith("adapter.host"), f"{path.name} imports {name}"


def call() -> Call:
    return Call("eu", "alice", "commit_import", "eu.commit_import", True, "f" * 16, "t" * 32)


def test_a_lost_response_cannot_become_failed_only_the_status_tool_decides() -> None:
    c = call()
    c.move(CallState.SENT, "sent")
    c.move(CallState.OUTCOME_UNKNOWN, "lost")
    c.move(CallState.OUTCOME_UNKNOWN, "status: still unknown")
    c.move(CallState.COMPLETED, "status: succeeded")
    with pytest.raises(IllegalTransition):
        c.move(CallState.FAILED, "late")
    assert c.finished


@pytest.mark.parametrize(
    ("path", "bad"),
    [
        ([], CallState.COMPLETED),  # planned -> completed without sending
        ([CallState.SENT, CallState.INPUT_REQUIRED], CallState.FAILED),  # a question is not a failure
        ([CallState.SENT, CallState.CANCELLED], CallState.SENT),  # cancelled is final
    ],
)
def test_moves_outside_the_machine_are_refused(path: list[CallState], bad: CallState) -> None:
    c = call()
    for state in path:
        c.move(state, "step")
    with pytest.raises(IllegalTransition):
        c.move(bad, "bad")


def tool(name: str, description: str = "d", **hints: bool) -> Tool:
    return Tool(
        name=name,
        description=description,
        input_schema={"type": "object"},
        annotations=ToolAnnotations(**hints) if hints else None,
    )


def test_rediscovery_is_diffed_and_a_changed_contract_loses_its_approval() -> None:
    registry = Registry()
    first = registry.apply("eu", [tool("a"), tool("b"), tool("c")], auto_approve={"a", "b"})
    assert [k.name for k in first.added] == ["a", "b", "c"]
    assert [e.qualified for e in registry.active()] == ["eu.a", "eu.b"], "c is not on the allowlist"
    with pytest.raises(UnknownCapability, match="not approved"):
        registry.resolve("eu.c")
    second = registry.apply("eu", [tool("a", "looser"), tool("b"), tool("d")], auto_approve=None)
    assert [k.name for k in second.changed] == ["a"]
    assert [k.name for k in second.removed] == ["c"] and [k.name for k in second.added] == ["d"]
    assert [e.qualified for e in registry.active()] == ["eu.b", "eu.d"]
    with pytest.raises(UnknownCapability, match="contract changed"):
        registry.resolve("eu.a")
    registry.apply("eu", [tool("a", "looser"), tool("b"), tool("d")], auto_approve=None)
    with pytest.raises(UnknownCapability, match="contract changed"):
        registry.resolve("eu.a")  # still the unapproved change on the next discovery
    registry.approve("eu.a", registry.entries[CapabilityKey("eu", "a")].fingerprint)
    assert registry.resolve("eu.a").changed is False
    with pytest.raises(UnknownCapability):
        registry.resolve("eu.c")
    registry.apply("us", [tool("a")], auto_approve=None)
    assert registry.resolve("us.a").key.server == "us" and registry.resolve("eu.b").key.server == "eu"


def test_risk_is_the_hosts_decision_hints_only_inform_the_default() -> None:
    policy = Policy({"eu": ServerRule(principals={"alice"}, risk={"sneaky": Risk.DESTRUCTIVE})})
    assert policy.risk_of("eu", tool("read", read_only_hint=True)) is Risk.READ
    assert policy.risk_of("eu", tool("sneaky", read_only_hint=True)) is Risk.DESTRUCTIVE
    assert policy.risk_of("eu", tool("silent")) is Risk.DESTRUCTIVE
    assert policy.risk_of("eu", tool("write", destructive_hint=False)) is Risk.WRITE
    with pytest.raises(PolicyDenied):
        policy.check_server(Principal("alice", "acme"), "elsewhere")
    with pytest.raises(PolicyDenied):
        policy.check_server(Principal("bob", "acme"), "eu")


def test_private_results_are_keyed_by_principal_and_tenant_public_ones_by_server() -> None:
    now = [0.0]
    cache = ResultCache(clock=lambda: now[0])
    cache.put(ResultCache.key("eu", "resources/read", "u", "alice", "acme", "private"), "alice's", 1000)
    cache.put(ResultCache.key("eu", "tools/list", "", "alice", "acme", "public"), "tools", 1000)
    cache.put(ResultCache.key("eu", "resources/read", "v", "alice", "acme", "private"), "no ttl", 0)
    assert cache.get("eu", "resources/read", "u", "alice", "acme") == "alice's"
    assert cache.get("eu", "resources/read", "u", "bob", "acme") is None
    assert cache.get("eu", "resources/read", "u", "alice", "other-tenant") is None
    assert cache.get("us", "resources/read", "u", "alice", "acme") is None
    assert cache.get("eu", "tools/list", "", "bob", "acme") == "tools"
    assert cache.get("eu", "resources/read", "v", "alice", "acme") is None
    now[0] = 1.0
    assert cache.get("eu", "resources/read", "u", "alice", "acme") is None, "ttlMs is honoured"


def test_audit_events_carry_no_tokens_arguments_or_results() -> None:
    log = AuditLog()
    c = call()
    log.record(
        AuditEvent(
            AuditLog.now(),
            c.server,
            c.principal,
            c.qualified,
            c.fingerprint,
            "completed",
            c.call_id,
            c.trace_id,
        )
    )
    fields = set(log.events[0].as_dict())
    assert fields == {
        "at",
        "server",
        "principal",
        "tool",
        "fingerprint",
        "outcome",
        "call_id",
        "trace_id",
        "detail",
        "tenant",
    }
    json.dumps(log.events[0].as_dict())


def test_the_operation_status_long_polls_and_its_verdict_tells_running_stopped_and_unknown_apart() -> None:
    waiting = OperationStatus(wait_seconds=4)
    assert waiting.arguments(None, "op_1") == {"operation_id": "op_1", "wait_seconds": 4}
    assert waiting.arguments(None, None) is None, "nothing to ask by: no action"
    assert OperationStatus().arguments("k", None) == {"idempotency_key": "k"}
    seen = {s: waiting.verdict({"status": s}) for s in ("in_progress", "succeeded", "cancelled", "failed")}
    seen["outcome_unknown"] = waiting.verdict({"status": "outcome_unknown"})
    assert (seen["in_progress"].applied, seen["in_progress"].running) == (None, True)
    assert (seen["outcome_unknown"].applied, seen["outcome_unknown"].running) == (None, False)
    assert seen["succeeded"].applied is True
    assert (seen["cancelled"].applied, seen["cancelled"].stopped) == (False, True)
    assert (seen["failed"].applied, seen["failed"].stopped) == (False, False)
    assert adapter_abort({"status": "in_progress", "handle": "imp_1"}) == (
        "abort_import",
        {"handle": "imp_1"},
    )
    assert adapter_abort({"status": "in_progress"}) is None


def test_only_the_servers_word_moves_an_unknown_outcome_and_it_may_say_still_running() -> None:
    c = call()
    c.move(CallState.SENT, "sent")
    c.move(CallState.OUTCOME_UNKNOWN, "lost")
    c.move(CallState.RUNNING, "status tool: still in_progress")
    c.move(CallState.CANCELLED, "status tool: cancelled")
    assert c.finished and c.states[-3:] == [CallState.OUTCOME_UNKNOWN, CallState.RUNNING, CallState.CANCELLED]
