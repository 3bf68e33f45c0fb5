"""The host: one object that holds servers, policy, registry, cache and audit, and makes calls.

A call goes: resolve the qualified name (registry), check policy, classify risk, make the idempotency
key and ask consent for an effect, send, answer input rounds, then settle the lifecycle from the
evidence: a result, a server error, nothing sent (failed, retryable) or no answer (outcome unknown,
with a status action). Nothing here resends an effectful call on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    InputRequiredResult,
    InputResponse,
    ListResourcesResult,
    ReadResourceResult,
    Tool,
)
from tenacity import AsyncRetrying, RetryError, stop_after_attempt, wait_exponential

from adapter.host.audit import AuditEvent, AuditLog, TraceContext
from adapter.host.builder import (
    all_tools,
    consent_request,
    idempotency_key,
    list_resources_page,
    read_resource_once,
    trace_meta,
    unreachable,
)
from adapter.host.cache import ResultCache
from adapter.host.connection import Connection, Principal, ServerSpec, connect
from adapter.host.elicit import ElicitationHandler, answer
from adapter.host.errors import HostError, PolicyDenied
from adapter.host.lifecycle import Call, CallState, StatusAction
from adapter.host.policy import ConsentCallback, Policy, Risk, ServerRule
from adapter.host.registry import Diff, Entry, Registry
from adapter.host.wire import WireRecord

if TYPE_CHECKING:
    from adapter.host.watch import Watch

__all__ = ["Host", "ProbeSchedule"]

log = logging.getLogger("adapter.host")
MAX_INPUT_ROUNDS = 5
UNREACHABLE = "server unreachable; nothing was sent"
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True)
class _Options:
    on_progress: ProgressCallback | None
    deadline: float | None


def _note_request(call: Call, record: WireRecord | None) -> None:
    """Keep the JSON-RPC id the request went out with (once), whatever became of its answer."""
    if record is not None and record.rpc_id is not None and record.rpc_id not in call.request_ids:
        call.request_ids.append(record.rpc_id)


class ProbeSchedule:
    """Bounded background probes for a server that went down: ``attempts`` tries, backing off."""

    def __init__(self, attempts: int = 8, first_wait: float = 0.2, max_wait: float = 5.0) -> None:
        self.attempts, self.first_wait, self.max_wait = attempts, first_wait, max_wait


class Host:
    """Talks to many MCP servers for many principals, keeping each (server, principal) apart."""

    def __init__(
        self,
        servers: list[ServerSpec],
        policy: Policy,
        *,
        consent: ConsentCallback,
        elicitation: ElicitationHandler | None = None,
        audit: AuditLog | None = None,
        probes: ProbeSchedule | None = None,
    ) -> None:
        self.servers = {spec.id: spec for spec in servers}
        self.policy = policy
        self.registry = Registry()
        self.cache = ResultCache()
        self.audit = audit or AuditLog()
        self._consent = consent
        self._elicitation = elicitation
        self._probes = probes or ProbeSchedule()
        self._probing: dict[str, asyncio.Task[None]] = {}
        self.watches: list[Watch] = []  # started by adapter.host.watch.watch(); stopped by aclose()

    async def __aenter__(self) -> Host:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        tasks = [*self._probing.values(), *(w.task for w in self.watches)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def connect(self, server: str, principal: Principal) -> AbstractAsyncContextManager[Connection]:
        """A client for ``principal`` on ``server`` (policy checked); an async context manager."""
        self.policy.check_server(principal.id, server)
        legacy_callback = self._legacy_elicitation(server, principal) if self._elicitation else None
        return connect(self.servers[server], principal, legacy_callback)

    # --- discovery -------------------------------------------------------------------------

    async def discover(self, principal: Principal) -> dict[str, Diff]:
        """Discover every server ``principal`` may use; an unreachable one goes down and is probed."""
        diffs: dict[str, Diff] = {}
        for server in self.servers:
            try:
                self.policy.check_server(principal.id, server)
            except PolicyDenied:
                continue
            diff = await self.discover_server(server, principal)
            if diff is not None:
                diffs[server] = diff
        return diffs

    async def discover_server(self, server: str, principal: Principal) -> Diff | None:
        try:
            async with self.connect(server, principal) as conn:
                tools = await all_tools(conn)
        except Exception as exc:
            if not unreachable(exc):
                raise
            self._went_down(server, principal)
            return None
        diff = self.registry.apply(server, tools, auto_approve=self._auto_approve(server, tools))
        if not diff.empty:
            self.cache.invalidate(server)
        return diff

    def _auto_approve(self, server: str, tools: list[Tool]) -> set[str]:
        """Which new tools are approved without asking: on first contact the allowlist; after that
        (a tool that appeared later) only those the allowlist names, or reads when it names none."""
        rule = self.policy.rule(server)
        known = any(key.server == server for key in self.registry.entries)
        if not known:
            return {t.name for t in tools} if rule.tools is None else set(rule.tools)
        if rule.tools is not None:
            return set(rule.tools)
        return {t.name for t in tools if self.policy.risk_of(server, t) is Risk.READ}

    def _went_down(self, server: str, principal: Principal) -> None:
        self.registry.mark_down(server)
        task = self._probing.get(server)
        if task is None or task.done():
            self._probing[server] = asyncio.create_task(self._probe(server, principal))

    def probe_task(self, server: str) -> asyncio.Task[None] | None:
        """The background probe of a server that went down (done once it came back or gave up)."""
        return self._probing.get(server)

    async def _probe(self, server: str, principal: Principal) -> None:
        schedule = self._probes
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(schedule.attempts),
                wait=wait_exponential(multiplier=schedule.first_wait, max=schedule.max_wait),
            ):
                with attempt:
                    async with self.connect(server, principal) as conn:
                        tools = await all_tools(conn)
        except RetryError:
            log.warning("server %s stayed unreachable after %d probes", server, schedule.attempts)
            return
        self.registry.apply(server, tools, auto_approve=self._auto_approve(server, tools))
        self.cache.invalidate(server)

    def active(self, principal: Principal) -> list[Entry]:
        """What ``principal`` may be offered now: approved, reachable and allowed by the current policy."""
        allowed = []
        for entry in self.registry.active():
            try:
                self.policy.check_tool(principal.id, entry.key.server, entry.key.name)
            except PolicyDenied:
                continue
            allowed.append(entry)
        return allowed

    # --- calls ------------------------------------------------------------------------------

    async def call(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        trace: TraceContext | None = None,
        on_progress: ProgressCallback | None = None,
        deadline_seconds: float | None = None,
    ) -> Call:
        """Call the active tool ``name`` (qualified or alias) and return the settled :class:`Call`.

        Raises :class:`UnknownCapability` or :class:`PolicyDenied` before anything is sent; every
        outcome after that (including a refused consent) is a state of the returned call.
        """
        entry = self.registry.resolve(name)
        server, tool = entry.key.server, entry.key.name
        try:
            rule = self.policy.check_tool(principal.id, server, tool)
            if principal.id not in self.servers[server].credentials:  # before consent: it could not be sent
                raise PolicyDenied(f"no credentials for {principal.id!r} on {server!r}")
        except PolicyDenied as exc:
            self._audit_unsent(principal, entry, exc)
            raise
        risk = self.policy.risk_of(server, entry.tool)
        args = dict(arguments or {})
        trace = trace or TraceContext.new()
        call = Call(
            server,
            principal.id,
            tool,
            entry.qualified,
            risk is not Risk.READ,
            entry.fingerprint,
            trace.trace_id,
        )
        if call.effectful:
            call.idempotency_key = idempotency_key(entry.tool, rule, args)
            if not await self._consent(consent_request(call, risk, rule, args)):
                call.move(CallState.CANCELLED, "the user refused consent")
                self._audit(call)
                return call
        opened: list[Connection] = []
        try:
            async with self.connect(server, principal) as conn:
                opened.append(conn)
                await self._rounds(conn, call, rule, args, trace, _Options(on_progress, deadline_seconds))
        except Exception as exc:  # raised from the client's task group, e.g. a rejected response
            record = opened[0].journal.by_span.get(call.spans[-1]) if opened and call.spans else None
            _note_request(call, record)
            if call.state is CallState.PLANNED and not unreachable(exc):
                self._audit_unsent(principal, entry, exc, call)
                raise
            if not call.finished and call.state is not CallState.OUTCOME_UNKNOWN:
                self._settle_exception(call, rule, record, exc)
            if call.error == UNREACHABLE:
                self._went_down(server, principal)
        self._audit(call)
        return call

    async def _rounds(
        self,
        conn: Connection,
        call: Call,
        rule: ServerRule,
        args: dict[str, Any],
        trace: TraceContext,
        options: _Options,
    ) -> None:
        responses: dict[str, InputResponse] | None = None
        state: str | None = None
        for round_no in range(1, MAX_INPUT_ROUNDS + 1):
            span, traceparent = trace.child()
            call.spans.append(span)
            call.move(CallState.SENT, f"round {round_no}")

            async def running(progress: float, total: float | None, message: str | None) -> None:
                if call.state is CallState.SENT:
                    call.move(CallState.RUNNING, "progress reported")
                if options.on_progress is not None:
                    await options.on_progress(progress, total, message)

            try:
                with anyio.move_on_after(options.deadline) as deadline:
                    result = await conn.client.session.call_tool(
                        call.tool,
                        args,
                        progress_callback=running,
                        input_responses=responses,
                        request_state=state,
                        meta=trace_meta(traceparent),
                        allow_input_required=True,
                    )
            except Exception as exc:
                record = conn.journal.by_span.get(span)
                _note_request(call, record)
                self._settle_exception(call, rule, record, exc)
                if call.error == UNREACHABLE:
                    self._went_down(call.server, conn.principal)
                return
            record = conn.journal.by_span.get(span)
            _note_request(call, record)
            if deadline.cancelled_caught:
                self._abandoned(call, rule, record)
                return
            if isinstance(result, InputRequiredResult):
                call.move(CallState.INPUT_REQUIRED, f"{len(result.input_requests or {})} question(s)")
                responses = await self._answers(conn, call, rule, result)
                if responses is None:
                    return
                state = result.request_state
                continue
            self._settle_result(call, rule, result)
            return
        self._no_answer(call, rule, None, "too many input rounds")

    async def _answers(
        self, conn: Connection, call: Call, rule: ServerRule, result: InputRequiredResult
    ) -> dict[str, InputResponse] | None:
        answers: dict[str, InputResponse] = {}
        for key, request in (result.input_requests or {}).items():
            if not isinstance(request, ElicitRequest):  # sampling, roots: never declared by this host
                call.move(CallState.CANCELLED, f"server asked for an undeclared capability ({key})")
                return None
            reply = await answer(
                self._elicitation,
                server=call.server,
                principal=call.principal,
                tool=call.tool,
                call_id=call.call_id,
                key=key,
                request=request,
                url_domains=rule.url_domains,
            )
            call.elicitation = reply.action
            answers[key] = reply
        return answers

    def _settle_result(self, call: Call, rule: ServerRule, result: CallToolResult | Any) -> None:
        if not isinstance(result, CallToolResult):
            self._no_answer(call, rule, None, "an unexpected result shape")
            return
        structured = dict(result.structured_content or {})
        call.result = structured or [getattr(block, "text", None) for block in result.content]
        if result.is_error:
            call.error = " ".join(getattr(block, "text", "") for block in result.content)[:300]
            call.move(CallState.FAILED, "the server returned an error result")
            return
        if rule.unknown_when is not None and rule.unknown_when(structured):
            call.operation_id = structured.get("operation_id")
            self._no_answer(call, rule, None, "the server could not observe the outcome")
            return
        call.move(CallState.COMPLETED, "result received")

    def _settle_exception(
        self, call: Call, rule: ServerRule, record: WireRecord | None, exc: Exception
    ) -> None:
        if call.state is CallState.INPUT_REQUIRED:  # the answer could not be given: nothing more is sent
            call.error = f"the question could not be answered: {type(exc).__name__}"
            call.move(CallState.CANCELLED, call.error)
        elif record is not None and record.rejected:
            call.error = f"response rejected: {record.rejected}"
            if call.effectful:
                self._no_answer(call, rule, record, call.error)
            else:
                call.move(CallState.FAILED, call.error)
        elif (record is None or not record.sent) and (record is not None or unreachable(exc)):
            call.error = UNREACHABLE
            call.move(CallState.FAILED, call.error)
        elif (
            record is not None and record.answered
        ):  # a JSON-RPC error from the server: it refused the request
            call.error = str(exc)[:300]
            call.move(CallState.FAILED, "the server answered with an error")
        else:
            self._no_answer(call, rule, record, "the response was lost")

    def _abandoned(self, call: Call, rule: ServerRule, record: WireRecord | None) -> None:
        """The deadline passed and the request was cancelled: harmless for a read, unknown for an effect."""
        why = "the deadline passed; the request was cancelled"
        if call.effectful and record is not None and record.sent:
            self._no_answer(call, rule, record, why + " after it was sent")
        else:
            call.move(CallState.CANCELLED, why)

    def _no_answer(self, call: Call, rule: ServerRule, record: WireRecord | None, why: str) -> None:
        """Sent but not answered: the outcome is unknown; offer the server's status tool, never a resend.

        Only an action that can work is offered: without a key or operation id to ask by, the call
        stays ``outcome_unknown`` with no action and the application decides (e.g. reads the resource).
        """
        call.move(CallState.OUTCOME_UNKNOWN, why)
        if not call.effectful or rule.status is None:
            return
        arguments = rule.status.arguments(call.idempotency_key, call.operation_id)
        if arguments is not None:
            call.status_action = StatusAction(
                call.server, rule.status.tool, arguments, f"Ask {call.server} whether {call.tool} took effect"
            )

    async def resolve(self, principal: Principal, call: Call) -> Call:
        """Run the call's status action once and move the call by the server's verdict."""
        action = call.status_action
        if action is None or call.state is not CallState.OUTCOME_UNKNOWN:
            raise HostError(f"call {call.call_id} has no status action")
        if principal.id != call.principal:
            raise PolicyDenied("only the caller may check a call's status")
        resolver = self.policy.check_server(principal.id, call.server).status
        assert resolver is not None
        _, traceparent = TraceContext(call.trace_id).child()
        async with self.connect(call.server, principal) as conn:
            result = await conn.client.session.call_tool(
                action.tool,
                action.arguments,
                meta=trace_meta(traceparent),
            )
        if result.is_error or not isinstance(result.structured_content, dict):
            call.server_status = "not_found" if result.is_error else "unreadable"
            call.move(CallState.OUTCOME_UNKNOWN, f"status tool: {call.server_status}")
        else:
            verdict = resolver.verdict(result.structured_content)
            call.server_status, call.operation_id = verdict.server_status, verdict.operation_id
            if verdict.applied is True:
                call.move(CallState.COMPLETED, f"status tool: {verdict.server_status}")
            elif verdict.applied is False:
                call.move(CallState.FAILED, f"status tool: {verdict.server_status}")
            else:
                call.move(CallState.OUTCOME_UNKNOWN, f"status tool: still {verdict.server_status}")
        if call.finished:
            call.status_action = None
        self._audit(call, detail="status resolution")
        return call

    # --- lists and reads (cached) ------------------------------------------------------------

    async def list_resources(
        self, principal: Principal, server: str, cursor: str | None = None
    ) -> ListResourcesResult:
        """One page (each page is cached on its own; no cross-page snapshot is implied)."""
        result = await self._cached(principal, server, "resources/list", cursor or "", list_resources_page)
        assert isinstance(result, ListResourcesResult)
        return result

    async def read_resource(self, principal: Principal, server: str, uri: str) -> ReadResourceResult:
        result = await self._cached(principal, server, "resources/read", uri, read_resource_once)
        assert isinstance(result, ReadResourceResult)
        return result

    async def _cached(
        self,
        principal: Principal,
        server: str,
        method: str,
        target: str,
        fetch: Callable[[Connection, str], Awaitable[Any]],
    ) -> Any:
        """Policy first, every time (a fresh entry is no permission); then the cache; then the source."""
        self.policy.check_server(principal.id, server)
        hit = self.cache.get(server, method, target, principal.id, principal.tenant)
        if hit is not None:
            return hit
        async with self.connect(server, principal) as conn:
            result = await fetch(conn, target)
        scope = result.cache_scope or "private"
        key = self.cache.key(server, method, target, principal.id, principal.tenant, scope)
        self.cache.put(key, result, result.ttl_ms)
        return result

    # --- helpers ----------------------------------------------------------------------------

    def _legacy_elicitation(self, server: str, principal: Principal) -> Any:
        """The SDK callback for handshake-era servers, which ask over their session."""
        rule = self.policy.rule(server)

        async def callback(ctx: Any, params: Any) -> Any:
            request = ElicitRequest(params=params)
            return await answer(
                self._elicitation,
                server=server,
                principal=principal.id,
                tool="?",
                call_id="legacy",
                key=str(getattr(ctx, "request_id", "")),
                request=request,
                url_domains=rule.url_domains,
            )

        return callback

    def _audit_unsent(
        self, principal: Principal, entry: Entry, exc: Exception, call: Call | None = None
    ) -> None:
        """A call the host refused or could not start: ``denied`` by policy (or missing credentials),
        else ``error``; the detail names the reason, never arguments or tokens."""
        denied = isinstance(exc, PolicyDenied)
        self.audit.record(
            AuditEvent(
                AuditLog.now(),
                entry.key.server,
                principal.id,
                entry.qualified,
                entry.fingerprint,
                "denied" if denied else "error",
                call.call_id if call else "",
                call.trace_id if call else "",
                str(exc) if denied else f"not sent: {type(exc).__name__}",
            )
        )

    def _audit(self, call: Call, detail: str = "") -> None:
        self.audit.record(
            AuditEvent(
                AuditLog.now(),
                call.server,
                call.principal,
                call.qualified,
                call.fingerprint,
                call.state.value,
                call.call_id,
                call.trace_id,
                detail or (call.history[-1][2] if call.history else ""),
            )
        )
