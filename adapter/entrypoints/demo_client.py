"""The demo's client: every tool call goes through the host kit (:mod:`adapter.host`).

``HostCaller`` keeps the demo's simple ``call(url, token, tool, args)`` shape while the kit does the
host's work: qualified names, consent before each effectful call (printed and granted), a host-made
idempotency key, question rounds answered by the step's callback, the call lifecycle, audit, an
unknown outcome offered as a status action, and resource lists and reads through the kit's cache.
Two hosts: one that can render questions (and so declares elicitation) and one that cannot, as a
real application would be built one way or the other. ``commit_and_follow`` is a third kind of host:
one with a short request timeout (5 s, as openai-agents has) that follows a commit the server still
runs (``in_progress``, or a task where it opts in to the Tasks extension) to its outcome.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp_types import ElicitResult, ListResourcesResult, ReadResourceResult

from adapter.host import (
    AuditLog,
    Call,
    CallState,
    ConsentRequest,
    Host,
    OperationStatus,
    Policy,
    Principal,
    Question,
    ServerRule,
    ServerSpec,
    TransportDecision,
    adapter_abort,
    adapter_running,
    adapter_unknown,
)

__all__ = ["Followed", "HostCaller"]

SERVER = "adapter"
DEMO_TRANSPORT = TransportDecision(
    operator="the demo itself",
    update_path="this working tree",
    principal="the demo's users, each with a bearer token",
    network_path="loopback HTTP",
    lifecycle="as long as `make demo` runs",
)
Answer = Callable[[Any, Any], Awaitable[ElicitResult]]


async def _consent(request: ConsentRequest) -> bool:
    print(f"   [consent] {request.summary()} -> granted")
    return True


def _rule(principals: set[str]) -> ServerRule:
    return ServerRule(
        principals=principals,
        consent_parameters={
            "commit_import": ("handle",),
            "abort_import": ("handle",),
            "add_records": ("handle",),
        },
        status=OperationStatus(wait_seconds=4),
        unknown_when=adapter_unknown,
        running_when=adapter_running,
        stop_with=adapter_abort,
    )


@dataclass(frozen=True)
class Followed:
    """A commit the host followed: its first answer (state, after how long) and how it ended."""

    first: CallState
    first_answer: str  # "in_progress (n of N records sent)" or "a task"
    answered_after: float
    call: Call
    questions: int
    seconds: float


class HostCaller:
    """``await caller(url, token, tool, args, elicitation_callback=..., progress_callback=...)``."""

    def __init__(self, url: str, principals: dict[str, str]) -> None:
        self._principals = {token: Principal(name, "acme") for token, name in principals.items()}
        credentials = {Principal(name, "acme"): token for token, name in principals.items()}
        self._answer: Answer | None = None
        self.audit = AuditLog()
        self.last: Call | None = None
        self._hosts = {
            asks: Host(
                [ServerSpec(SERVER, url, credentials, transport=DEMO_TRANSPORT)],
                Policy({SERVER: _rule({p.id for p in credentials})}),
                consent=_consent,
                elicitation=self._render if asks else None,
                audit=self.audit,
            )
            for asks in (True, False)
        }
        self._discovered: set[bool] = set()

    async def _render(self, question: Question) -> ElicitResult:
        assert self._answer is not None
        return await self._answer(None, question)

    async def __call__(
        self, url: str, token: str, tool: str, args: dict[str, Any], **kwargs: Any
    ) -> dict[str, Any]:
        asks = kwargs.get("elicitation_callback") is not None
        self._answer = kwargs.get("elicitation_callback")
        host, principal = self._hosts[asks], self._principals[token]
        if asks not in self._discovered:
            await host.discover(principal)
            self._discovered.add(asks)
        self.last = await host.call(
            principal, f"{SERVER}.{tool}", args, on_progress=kwargs.get("progress_callback")
        )
        if self.last.state is CallState.FAILED:
            return {"error": self.last.error}
        return dict(self.last.result or {})

    async def list_resources(self, token: str) -> ListResourcesResult:
        """One page of the principal's resources, through the kit's cache (policy checked first)."""
        host = self._hosts[False]
        principal = self._principals[token]
        if False not in self._discovered:
            await host.discover(principal)
            self._discovered.add(False)
        return await host.list_resources(principal, SERVER)

    async def read_resource(self, token: str, uri: str) -> ReadResourceResult:
        return await self._hosts[False].read_resource(self._principals[token], SERVER, uri)

    async def resolve(self, token: str, call: Call) -> Call:
        """The status action for an unknown outcome: ask the server, never resend."""
        return await self._hosts[False].resolve(self._principals[token], call)

    async def commit_and_follow(
        self, url: str, token: str, handle: str, *, tasks: bool, timeout_seconds: float = 5.0
    ) -> Followed:
        """``commit_import`` through a host whose requests time out after ``timeout_seconds``,
        then followed (``get_operation_status`` long-polled, or ``tasks/get``) to the outcome."""
        principal = self._principals[token]
        spec = ServerSpec(
            SERVER,
            url,
            {principal: token},
            transport=DEMO_TRANSPORT,
            timeout_seconds=timeout_seconds,
            tasks=tasks,
        )
        policy = Policy({SERVER: _rule({principal.id})})
        async with Host([spec], policy, consent=_consent, audit=self.audit) as host:
            await host.discover(principal)
            started = time.monotonic()
            commit = host.start(principal, f"{SERVER}.commit_import", {"handle": handle})
            call = await commit.wait()
            first, answered_after = call.state, time.monotonic() - started
            kind = call.follow_up.kind if call.follow_up is not None else "none"
            first_result = call.structured if isinstance(call.structured, dict) else {}
            answer = "a task" if kind == "task" else str(first_result.get("status", kind))
            if first_result.get("records_sent") is not None:
                answer += (
                    f" ({first_result['records_sent']} of {first_result.get('record_count')} records sent)"
                )
            done = await commit.follow(deadline_seconds=120)
        followed = re.search(r"followed \([^,]+, (\d+) questions\)", self.audit.events[-1].detail)
        return Followed(
            first,
            answer,
            answered_after,
            done,
            int(followed.group(1)) if followed else 0,
            time.monotonic() - started,
        )

    async def aclose(self) -> None:
        for host in self._hosts.values():
            await host.aclose()
