"""The seed's acceptance matrix against two real instances of this kit's server over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from mcp_types import ElicitResult

from adapter.host import (
    AuditLog,
    CallState,
    ConsentRequest,
    Host,
    OperationStatus,
    Policy,
    PolicyDenied,
    Principal,
    ProbeSchedule,
    Question,
    ServerRule,
    ServerSpec,
    UnknownCapability,
    adapter_unknown,
    watch,
)

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", "acme")
BOB = Principal("bob", "acme")


class Consents:
    """Records every consent prompt; refuses tools named in ``refuse``."""

    def __init__(self) -> None:
        self.seen: list[ConsentRequest] = []
        self.refuse: set[str] = set()

    async def __call__(self, request: ConsentRequest) -> bool:
        self.seen.append(request)
        return request.tool not in self.refuse


def rule() -> ServerRule:
    return ServerRule(
        principals={"alice", "bob"},
        consent_parameters={"commit_import": ("handle",)},
        status=OperationStatus(),
        unknown_when=adapter_unknown,
    )


def build_host(servers: dict[str, Any], faults: dict[str, Any], **kwargs: Any) -> tuple[Host, Consents]:
    consents = Consents()
    specs = [
        ServerSpec(name, server.url, server.tokens, wrap_transport=faults[name].wrap)
        for name, server in servers.items()
    ]
    policy = Policy({name: rule() for name in servers})
    host = Host(specs, policy, consent=consents, audit=AuditLog(), probes=ProbeSchedule(60, 0.05, 0.3), **kwargs)
    return host, consents


async def stage(host: Host, who: Principal, server: str, target: str = "customers") -> str:
    begun = await host.call(who, f"{server}.begin_import", {"target": target})
    assert begun.state is CallState.COMPLETED, begun.error
    handle = str(begun.result["handle"])
    added = await host.call(who, f"{server}.add_record", {"handle": handle, "record": {"id": 1}})
    assert added.state is CallState.COMPLETED, added.error
    return handle


async def test_same_tool_on_two_servers_stays_apart_in_registry_consent_and_audit(
    our_servers: dict[str, Any], faults: dict[str, Any]
) -> None:
    host, consents = build_host(our_servers, faults)
    async with host:
        diffs = await host.discover(ALICE)
        assert {k.qualified for k in diffs["eu"].added} >= {"eu.commit_import"}
        names = [e.qualified for e in host.registry.active()]
        assert "eu.commit_import" in names and "us.commit_import" in names
        handle = await stage(host, ALICE, "eu")
        committed = await host.call(ALICE, "eu.commit_import", {"handle": handle})
        assert committed.state is CallState.COMPLETED and committed.result["status"] == "committed"
        # The handle belongs to eu: the same tool name on us knows nothing of it.
        elsewhere = await host.call(ALICE, "us.get_import_status", {"handle": handle})
        assert elsewhere.state is CallState.FAILED and "handle_not_found" in (elsewhere.error or "")
        # bob on eu: the server keeps principals apart too.
        theirs = await host.call(BOB, "eu.get_import_status", {"handle": handle})
        assert theirs.state is CallState.FAILED
    commit_consent = [c for c in consents.seen if c.tool == "commit_import"]
    assert [(c.server, c.principal, c.qualified, c.parameters) for c in commit_consent] == [
        ("eu", "alice", "eu.commit_import", {"handle": handle})
    ]
    assert not [c for c in consents.seen if c.tool == "get_import_status"], "reads need no consent"
    audited = [(e.server, e.principal, e.tool, e.outcome) for e in host.audit.events]
    assert ("eu", "alice", "eu.commit_import", "completed") in audited
    assert ("us", "alice", "us.get_import_status", "failed") in audited
    assert ("eu", "bob", "eu.get_import_status", "failed") in audited
    fingerprints = {e.tool: e.fingerprint for e in host.audit.events}
    assert fingerprints["eu.commit_import"] == host.registry.resolve("eu.commit_import").fingerprint
