"""The call flow: resolve, check, ask, send, answer input rounds, settle the lifecycle from the evidence.

A call goes: resolve the qualified name (registry), check policy and credentials, classify risk and
make the idempotency key; for an effect, read the tool list again on the connection and compare the
tool's contract with the approved one, then ask (or find a pre-approval); send; answer input rounds;
then settle (:mod:`adapter.host.settle`): a result (completed; running when the server is still
working on it, an ``in_progress`` answer or a task; or, when the host cannot use it,
``outcome_unknown`` for an effect), a server error (failed), nothing sent (failed), no answer or a
cancel after sending (an effect's outcome is unknown, with a status action). Nothing here resends
an effectful call; following what is still running is :mod:`adapter.host.follow`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import (
    UNSUPPORTED_PROTOCOL_VERSION,
    ElicitRequest,
    InputRequiredResult,
    InputResponse,
)

from adapter.host.audit import TraceContext
from adapter.host.builder import (
    all_tools,
    consent_request,
    idempotency_key,
    read_call_result,
    send_call,
    trace_meta,
    unreachable,
)
from adapter.host.connection import Connection, Principal
from adapter.host.consent import ConsentCallback
from adapter.host.elicit import answer
from adapter.host.errors import PolicyDenied, ServerFailed, UnknownCapability, unwrap
from adapter.host.follow import Follower
from adapter.host.lifecycle import Call, CallState
from adapter.host.policy import Risk, ServerRule, Trust
from adapter.host.registry import Entry, fingerprint
from adapter.host.settle import no_answer, settle_result, unusable
from adapter.host.wire import WireRecord

if TYPE_CHECKING:
    from adapter.host.host import Host

__all__ = ["CallRunner", "Canceller", "Prepared", "ProgressCallback"]

MAX_INPUT_ROUNDS = 5
UNREACHABLE = "server unreachable; nothing was sent"
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class Canceller:
    """A user's stop for one call: cancels whatever the call is waiting on now (consent, an answer)."""

    requested: bool = False
    reason: str = "cancelled by the user"
    _scopes: list[anyio.CancelScope] = field(default_factory=list)

    def cancel(self, reason: str = "cancelled by the user") -> None:
        self.requested, self.reason = True, reason
        for scope in self._scopes:
            scope.cancel()

    def scope(self, deadline: float | None) -> anyio.CancelScope:
        scope = anyio.CancelScope(deadline=deadline if deadline is not None else float("inf"))
        if self.requested:
            scope.cancel()
        self._scopes.append(scope)
        return scope


@dataclass
class Prepared:
    principal: Principal
    entry: Entry
    rule: ServerRule
    risk: Risk
    call: Call
    args: dict[str, Any]
    trace: TraceContext
    cancel: Canceller = field(default_factory=Canceller)


def _note_request(call: Call, record: WireRecord | None) -> None:
    """Keep the JSON-RPC id the request went out with (once), whatever became of its answer."""
    if record is not None and record.rpc_id is not None and record.rpc_id not in call.request_ids:
        call.request_ids.append(record.rpc_id)


class CallRunner:
    def __init__(self, host: Host, consent: ConsentCallback) -> None:
        self.host = host
        self._consent = consent
        self.follower = Follower(host)  # after the answer: status questions, long-polls, tasks

    # --- before sending -------------------------------------------------------------------------

    def prepare(
        self, principal: Principal, name: str, arguments: dict[str, Any] | None, trace: TraceContext | None
    ) -> Prepared:
        """Resolve and check; raises :class:`UnknownCapability` / :class:`PolicyDenied` (audited)."""
        host = self.host
        entry = host.registry.resolve(name)
        server, tool = entry.key.server, entry.key.name
        try:
            rule = host.policy.check_tool(principal, server, tool)
            host.servers[server].require_credentials(principal)  # before consent: it could not be sent
            if (server, principal) in host.failures and host.failures[
                (server, principal)
            ].kind == "unauthorized":
                raise PolicyDenied(f"{principal.key!r} was refused by {server!r}; probing")
        except PolicyDenied as exc:
            host.audit_unsent(principal, entry, exc)
            raise
        risk = host.policy.risk_of(server, entry.tool)
        trace = trace or TraceContext.new()
        call = Call(
            server,
            principal.id,
            tool,
            entry.qualified,
            risk is not Risk.READ,
            entry.fingerprint,
            trace.trace_id,
            tenant=principal.tenant,
        )
        args = dict(arguments or {})
        if call.effectful:
            call.idempotency_key = idempotency_key(entry.tool, rule, args)
        return Prepared(principal, entry, rule, risk, call, args, trace)

    async def execute(
        self,
        p: Prepared,
        on_progress: ProgressCallback | None,
        deadline_seconds: float | None,
    ) -> Call:
        host, call = self.host, p.call
        deadline = anyio.current_time() + deadline_seconds if deadline_seconds is not None else None
        opened: list[Connection] = []
        changed: UnknownCapability | None = None
        try:
            async with host.connect(call.server, p.principal) as conn:
                opened.append(conn)
                if call.effectful and p.rule.recheck_contract:
                    changed = await self._recheck(conn, p)
                if changed is None:
                    if call.effectful and not await self._ask(p, deadline):
                        host.audit_call(call)
                        return call
                    await self._rounds(conn, p, on_progress, deadline)
        except Exception as caught:  # raised from the client's task group, e.g. a rejected response
            exc = unwrap(caught)
            record = opened[0].journal.by_span.get(call.spans[-1]) if opened and call.spans else None
            _note_request(call, record)
            if call.state is CallState.PLANNED and not unreachable(exc) and not isinstance(exc, ServerFailed):
                host.audit_unsent(p.principal, p.entry, caught, call)
                raise
            if call.state is CallState.PLANNED:
                kind = exc.kind if isinstance(exc, ServerFailed) else "unreachable"
                call.error = UNREACHABLE if kind == "unreachable" else f"server {kind}; nothing was sent"
                call.move(CallState.FAILED, call.error)
                if kind in ("unreachable", "unavailable"):
                    host.went_down(call.server, p.principal)
            elif not call.finished and call.state is not CallState.OUTCOME_UNKNOWN:
                self._settle_exception(p, record, exc)
        if changed is not None:  # the contract changed since approval: nothing was sent
            host.audit_unsent(p.principal, p.entry, changed, call)
            raise changed
        host.audit_call(call)
        return call

    async def _recheck(self, conn: Connection, p: Prepared) -> UnknownCapability | None:
        """The second check before an effect: the tool's contract as the server declares it now.

        Returns the refusal rather than raising it: raised inside the connection, the SDK's task
        group would wrap it."""
        tools = await all_tools(conn)
        current = next((t for t in tools if t.name == p.call.tool), None)
        if current is not None and fingerprint(current) == p.call.fingerprint:
            return None
        self.host.apply_tools(p.call.server, tools)
        return UnknownCapability(
            f"{p.call.qualified}: its contract changed since it was approved; nothing was sent"
        )

    async def _ask(self, p: Prepared, deadline: float | None) -> bool:
        """Consent for this one effect (or a pre-approval that covers it); a refusal cancels the call."""
        call = p.call
        request = consent_request(call, p.entry.tool, p.risk, p.rule, p.args)
        ignored = {p.rule.idempotency_argument}
        if p.rule.trust is not Trust.UNTRUSTED and self.host.pre_approvals.match(request, p.args, ignored):
            call.consent = "pre-approved"
            return True
        call.consent = "asked"
        agreed = False
        with p.cancel.scope(deadline):
            agreed = await self._consent(request)
        if p.cancel.requested and not agreed:
            call.move(CallState.CANCELLED, p.cancel.reason + " before sending")
            return False
        if not agreed:
            call.move(CallState.CANCELLED, "the user refused consent")
        return agreed

    # --- sending --------------------------------------------------------------------------------

    async def _rounds(
        self, conn: Connection, p: Prepared, on_progress: ProgressCallback | None, deadline: float | None
    ) -> None:
        call = p.call
        responses: dict[str, InputResponse] | None = None
        state: str | None = None
        for round_no in range(1, MAX_INPUT_ROUNDS + 1):
            span, traceparent = p.trace.child()
            call.spans.append(span)
            if p.cancel.requested:
                call.move(CallState.CANCELLED, p.cancel.reason + " before sending")
                return
            call.move(CallState.SENT, f"round {round_no}")

            async def running(progress: float, total: float | None, message: str | None) -> None:
                if call.state is CallState.SENT:
                    call.move(CallState.RUNNING, "progress reported")
                if on_progress is not None:
                    await on_progress(progress, total, message)

            raw: dict[str, Any] | None = None
            try:
                with p.cancel.scope(deadline) as scope:
                    raw = await send_call(
                        conn,
                        call.tool,
                        p.args,
                        progress=running,
                        responses=responses,
                        state=state,
                        meta=trace_meta(traceparent),
                    )
            except Exception as exc:
                record = conn.journal.by_span.get(span)
                _note_request(call, record)
                self._settle_exception(p, record, exc)
                return
            record = conn.journal.by_span.get(span)
            _note_request(call, record)
            if scope.cancelled_caught or raw is None:
                self._abandoned(p, record)
                return
            read = read_call_result(raw, p.entry.tool)
            if read.questions is not None:
                call.move(CallState.INPUT_REQUIRED, f"{len(read.questions.input_requests or {})} question(s)")
                with p.cancel.scope(deadline):
                    responses = await self._answers(conn, p, read.questions)
                if p.cancel.requested:
                    call.move(CallState.CANCELLED, p.cancel.reason + " while a question was open")
                    return
                if responses is None:
                    return
                state = read.questions.request_state
                continue
            settle_result(call, p.rule, read, tasks_declared=conn.declares_tasks)
            return
        no_answer(p.call, p.rule, "too many input rounds")

    async def _answers(
        self, conn: Connection, p: Prepared, result: InputRequiredResult
    ) -> dict[str, InputResponse] | None:
        call = p.call
        answers: dict[str, InputResponse] = {}
        for key, request in (result.input_requests or {}).items():
            if not isinstance(request, ElicitRequest):  # sampling, roots: never declared by this host
                call.move(CallState.CANCELLED, f"server asked for an undeclared capability ({key})")
                return None
            reply = await answer(
                self.host._elicitation,
                server=call.server,
                principal=call.principal,
                tool=call.tool,
                call_id=call.call_id,
                key=key,
                request=request,
                url_domains=p.rule.url_domains,
            )
            call.elicitation = reply.action
            answers[key] = reply
        return answers

    # --- settling -------------------------------------------------------------------------------

    def _settle_exception(self, p: Prepared, record: WireRecord | None, exc: BaseException) -> None:
        call = p.call
        if record is not None and record.error_code == UNSUPPORTED_PROTOCOL_VERSION:
            self.host.servers[call.server].forget()  # the server changed era: learn it again
        if call.state is CallState.INPUT_REQUIRED:  # the answer could not be given: nothing more is sent
            call.error = f"the question could not be answered: {type(exc).__name__}"
            call.move(CallState.CANCELLED, call.error)
        elif record is not None and record.rejected:
            call.error = f"response rejected: {record.rejected}"
            if call.effectful and record.sent:
                no_answer(p.call, p.rule, call.error)
            else:
                call.move(CallState.FAILED, call.error)
        elif record is not None and record.sent and record.http_status in (401, 403):
            # refused at the door (no valid token, or a scope that could not be had): not processed
            status = record.http_status
            call.error = f"refused by the server (HTTP {status}): not authorized; nothing was done"
            call.move(CallState.FAILED, call.error)
        elif (record is None or not record.sent) and (record is not None or unreachable(exc)):
            call.error = UNREACHABLE
            call.move(CallState.FAILED, call.error)
            self.host.went_down(call.server, p.principal)
        elif record is not None and record.answered and record.error_code is not None:
            call.error = str(exc)[:300]  # a JSON-RPC error from the server: it refused the request
            call.move(CallState.FAILED, "the server answered with an error")
        elif record is not None and record.answered:
            unusable(p.call, p.rule, f"an answer the SDK could not read ({type(exc).__name__})")
        else:
            no_answer(p.call, p.rule, "the response was lost")

    def _abandoned(self, p: Prepared, record: WireRecord | None) -> None:
        """The request was cancelled (deadline or the user): harmless for a read, unknown for an effect.

        An effect still in flight counts as sent: the SDK posts it from a task of its own, so the
        cancellation can come before that post has a verdict while the server already runs it.
        """
        call = p.call
        why = p.cancel.reason if p.cancel.requested else "the deadline passed; the request was cancelled"
        if call.effectful and record is not None and (record.sent or record.in_flight):
            no_answer(p.call, p.rule, why + " after it was sent")
        else:
            call.move(CallState.CANCELLED, why)
