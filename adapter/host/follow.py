"""Following work the server still does after it answered, to its outcome; and stopping it.

A call the server answered but has not finished is ``running`` (never failed), with a
``call.follow_up`` that says how to follow it:

* ``operation``: a result the rule reads as running (``running_when``: ``in_progress`` with an
  operation id), or a lost answer whose status tool says it is still running. The host asks the
  server's status tool (the call's status action) again and again; with
  ``OperationStatus(wait_seconds=...)`` each question is a long-poll that the server answers as
  soon as the status changes. Two questions start at least ``POLL_FLOOR_SECONDS`` apart, so a
  server that does not long-poll is not hammered.
* ``task``: a ``resultType: task`` answer to a request that declared the Tasks extension. The host
  asks ``tasks/get`` every ``pollIntervalMs`` (as the server asks, within ``TASK_POLL_MS``):
  ``completed`` settles the call by the inlined result like any result (``failed`` for an error
  result, with its text), ``cancelled`` -> cancelled, ``failed`` -> failed, and a task id the
  server does not know (or any refusal of ``tasks/get``) -> outcome unknown, with the status action
  (by the idempotency key the host kept).

Following ends when the call settles, when the caller's deadline passes (the call stays running,
or unknown, with its status action: it can be followed again later), when it is stopped (the
handle's ``cancel()``), when there is nothing more to learn (the status tool does not know the
call), or after ``MAX_MISSES`` questions in a row that got no answer. Nothing here resends the
call. A follow is one audit event, a single status question (``Host.resolve``) one too.

Stopping work that already answered (``CallHandle.cancel()``): a task gets ``tasks/cancel``, the
stop the extension offers (cooperative: the follow-up then sees how it really ended). An operation
is not the host's to stop: the host stops following, and the server's own way to stop it, if the
rule names one (``ServerRule.stop_with``: ``abort_import`` for this kit's server, which voids the
batch once COMMIT was sent), is offered as ``call.stop_action``, an effect the application calls
through the host (policy, consent, audit) if the user wants it. Both are audited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Tool

from adapter.host.audit import TraceContext
from adapter.host.builder import ReadResult, read_call_result, send_call, trace_meta
from adapter.host.connection import Principal
from adapter.host.errors import HostError, PolicyDenied, unwrap
from adapter.host.lifecycle import Call, CallState
from adapter.host.policy import ServerRule, StatusVerdict
from adapter.host.registry import CapabilityKey
from adapter.host.settle import finish, no_answer, settle_result, unusable
from adapter.host.tasks import ACKNOWLEDGED, TaskState, cancel_task, get_task
from adapter.host.wire import WireRecord

if TYPE_CHECKING:
    from adapter.host.calls import Canceller
    from adapter.host.host import Host

__all__ = ["MAX_MISSES", "POLL_FLOOR_SECONDS", "TASK_POLL_MS", "Follower"]

POLL_FLOOR_SECONDS = 1.0
TASK_POLL_MS = (100, 30_000)  # the server's pollIntervalMs, kept within these bounds
TASK_POLL_DEFAULT_MS = 1_000  # a task that names no interval
MAX_MISSES = 5
TASK_NOT_FOUND = -32602
NOTHING_TO_LEARN = frozenset({"not_found", "unreadable"})


class Follower:
    """Status questions, long-polls and ``tasks/*`` for calls the server already answered."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def _rule(self, principal: Principal, call: Call) -> ServerRule:
        if (principal.id, principal.tenant) != (call.principal, call.tenant):
            raise PolicyDenied("only the caller may check or follow a call")
        return self.host.policy.check_server(principal, call.server)

    # --- the status tool ---------------------------------------------------------------------

    async def resolve(self, principal: Principal, call: Call, *, quiet: bool = False) -> Call:
        """Ask the call's status action once and move the call by the server's verdict.

        ``quiet`` (while following): an answer that changes nothing adds no history entry and no
        audit event; the follow as a whole is audited."""
        action = call.status_action
        if action is None or call.state not in (CallState.OUTCOME_UNKNOWN, CallState.RUNNING):
            raise HostError(f"call {call.call_id} has no status action")
        rule = self._rule(principal, call)
        resolver = rule.status
        assert resolver is not None
        _, traceparent = TraceContext(call.trace_id).child()
        async with self.host.connect(call.server, principal) as conn:
            raw = await send_call(
                conn,
                action.tool,
                action.arguments,
                progress=None,
                responses=None,
                state=None,
                meta=trace_meta(traceparent),
            )
        result = CallToolResult.model_validate(raw)
        before: tuple[CallState, str | None] = (call.state, call.server_status)
        target: CallState
        if result.is_error or not isinstance(result.structured_content, dict):
            call.server_status = "not_found" if result.is_error else "unreadable"
            target, why = call.state, f"status tool: {call.server_status}"
        else:
            verdict = resolver.verdict(result.structured_content)
            call.server_status, call.operation_id = verdict.server_status, verdict.operation_id
            target, why = _by_verdict(call, verdict)
        if not (quiet and (target, call.server_status) == before):
            call.move(target, why)
        finish(call)
        if not quiet:
            self.host.audit_call(call, detail="status resolution")
        return call

    # --- following -----------------------------------------------------------------------------

    async def follow(
        self, principal: Principal, call: Call, stop: Canceller, deadline_seconds: float | None = None
    ) -> Call:
        """Follow ``call`` to its outcome, or until the deadline passes or ``stop`` is cancelled."""
        rule = self._rule(principal, call)
        task = call.follow_up is not None and call.follow_up.kind == "task"
        open_ = call.state in (CallState.RUNNING, CallState.OUTCOME_UNKNOWN)
        if not ((task and call.state is CallState.RUNNING) or (call.status_action is not None and open_)):
            return call
        deadline = anyio.current_time() + deadline_seconds if deadline_seconds is not None else None
        asked = [0]  # a counter that survives the scope's cancellation
        by_task = task and call.state is CallState.RUNNING  # else the status tool (an unknown outcome too)
        with stop.scope(deadline) as scope:
            if by_task:
                await self._task(principal, call, rule, asked)
            else:
                await self._operation(principal, call, asked)
        kind = "tasks/get" if by_task else "status tool"
        if not call.finished and scope.cancelled_caught:
            why = stop.reason if stop.requested else "the follow deadline passed"
            call.move(call.state, f"{why}; still {call.state.value} on the server, not followed further")
        finish(call)
        self.host.audit_call(call, detail=f"followed ({kind}, {asked[0]} questions): {call.history[-1][2]}")
        return call

    async def _operation(self, principal: Principal, call: Call, asked: list[int]) -> None:
        misses = 0
        while not call.finished and call.status_action is not None:
            started = anyio.current_time()
            try:
                await self.resolve(principal, call, quiet=True)
                misses = 0
            except PolicyDenied:
                raise
            except Exception as caught:
                misses += 1
                if misses >= MAX_MISSES:
                    call.move(call.state, f"status tool: no answer {misses} times ({_name(caught)})")
                    return
            asked[0] += 1
            if call.finished or call.server_status in NOTHING_TO_LEARN:
                return
            await anyio.sleep(max(0.0, POLL_FLOOR_SECONDS - (anyio.current_time() - started)))

    async def _task(self, principal: Principal, call: Call, rule: ServerRule, asked: list[int]) -> None:
        assert call.follow_up is not None
        interval = _interval(call.follow_up.poll_interval_ms)
        misses = 0
        while call.state is CallState.RUNNING:
            try:
                task = await self._get(principal, call)
                misses = 0
            except PolicyDenied:
                raise
            except _Refused as refused:
                asked[0] += 1
                call.error = refused.why
                no_answer(call, rule, refused.why)
                return
            except Exception as caught:
                misses += 1
                if misses >= MAX_MISSES:
                    call.move(call.state, f"tasks/get: no answer {misses} times ({_name(caught)})")
                    return
            else:
                asked[0] += 1
                if task.poll_interval_ms is not None:
                    interval = _interval(task.poll_interval_ms)
                if not self._apply(call, rule, task):
                    return
            await anyio.sleep(interval)

    async def _get(self, principal: Principal, call: Call) -> TaskState:
        assert call.follow_up is not None
        span, traceparent = TraceContext(call.trace_id).child()
        record: WireRecord | None = None
        try:
            async with self.host.connect(call.server, principal) as conn:
                try:
                    return await conn.client.session.send_request(
                        get_task(call.follow_up.id, trace_meta(traceparent)), TaskState
                    )
                finally:
                    record = conn.journal.by_span.get(span)
        except Exception as caught:
            exc = unwrap(caught)
            if isinstance(exc, MCPError) and record is not None and record.answered:
                raise _Refused(exc) from caught
            raise

    def _apply(self, call: Call, rule: ServerRule, task: TaskState) -> bool:
        """Move the call by one ``tasks/get`` answer; False: nothing more to follow."""
        message = task.status_message or ""
        if task.status == "working":
            return True
        if task.status == "input_required":
            call.move(CallState.RUNNING, "the task asks for input (tasks/update); this host gives none")
            return False
        if task.status == "completed":
            if task.result is None:
                unusable(call, rule, "a completed task without its result")
            else:
                settle_result(call, rule, self._inlined(call, task.result))
        elif task.status == "cancelled":
            call.move(CallState.CANCELLED, f"task cancelled: {message[:120] or 'stopped on the server'}")
        elif task.status == "failed":
            error = task.error or {}
            call.error = str(error.get("message") or message or "the task failed")[:300]
            call.move(CallState.FAILED, "task failed")
        else:
            unusable(call, rule, f"a task status the host does not know ({task.status[:40]!r})")
        return False

    def _inlined(self, call: Call, raw: dict[str, object]) -> ReadResult:
        """A completed task's result, checked against the contract approved for the call."""
        entry = self.host.registry.entries.get(CapabilityKey(call.server, call.tool))
        if entry is not None and entry.fingerprint == call.fingerprint:
            return read_call_result(dict(raw), entry.tool)
        read = read_call_result(dict(raw), Tool(name=call.tool, input_schema={"type": "object"}))
        if read.result is not None and not read.result.is_error:
            why = "the tool's contract changed while the call ran; its result was not checked against it"
            return ReadResult(result=read.result, problem=why)
        return read

    # --- stopping --------------------------------------------------------------------------------

    async def cancel_task(self, principal: Principal, call: Call, reason: str) -> None:
        """``tasks/cancel`` for a call that became a task; audited whatever the server answers."""
        rule = self._rule(principal, call)
        assert call.follow_up is not None and call.follow_up.kind == "task"
        span, traceparent = TraceContext(call.trace_id).child()
        record: WireRecord | None = None
        detail = f"{reason}: tasks/cancel acknowledged; the task ends as the server stops it"
        try:
            async with self.host.connect(call.server, principal) as conn:
                try:
                    await conn.client.session.send_request(
                        cancel_task(call.follow_up.id, trace_meta(traceparent)), ACKNOWLEDGED
                    )
                finally:
                    record = conn.journal.by_span.get(span)
        except PolicyDenied:
            raise
        except Exception as caught:
            exc = unwrap(caught)
            refused = isinstance(exc, MCPError) and record is not None and record.answered
            answer = "refused" if refused else "not answered"
            detail = f"{reason}: tasks/cancel {answer} ({type(exc).__name__})"
            if refused and isinstance(exc, MCPError) and exc.code == TASK_NOT_FOUND and not call.finished:
                no_answer(call, rule, "the server no longer knows the task")
        if not call.finished:
            call.move(call.state, detail)
        self.host.audit_call(call, detail=detail)

    def stop_following(self, call: Call, reason: str) -> None:
        """A cancel after an operation answered: the host stops following; the server goes on."""
        if call.finished:
            return
        action = call.stop_action
        offer = f"stop it with {action.tool} ({action.label})" if action else "no way to stop it is known"
        call.move(call.state, f"{reason}: the host stops following; {call.server} goes on with it; {offer}")
        self.host.audit_call(call)


class _Refused(Exception):
    """The server answered a ``tasks/get`` with an error: it will not tell."""

    def __init__(self, exc: MCPError) -> None:
        code = exc.code
        self.why = (
            "the server no longer knows the task"
            if code == TASK_NOT_FOUND
            else f"the server refused tasks/get ({code})"
        )
        super().__init__(self.why)


def _by_verdict(call: Call, verdict: StatusVerdict) -> tuple[CallState, str]:
    if verdict.applied is True:
        return CallState.COMPLETED, f"status tool: {verdict.server_status}"
    if verdict.applied is False:
        stopped = CallState.CANCELLED if verdict.stopped else CallState.FAILED
        return stopped, f"status tool: {verdict.server_status}"
    if verdict.running:
        return CallState.RUNNING, f"status tool: still {verdict.server_status}"
    return CallState.OUTCOME_UNKNOWN, f"status tool: still {verdict.server_status}"


def _name(caught: BaseException) -> str:
    return type(unwrap(caught)).__name__


def _interval(poll_ms: int | None) -> float:
    low, high = TASK_POLL_MS
    chosen = TASK_POLL_DEFAULT_MS if poll_ms is None else poll_ms
    return min(max(chosen, low), high) / 1000
