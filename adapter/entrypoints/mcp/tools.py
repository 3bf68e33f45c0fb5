"""The MCP tools: thin translations between tool arguments and the service layer.

Each tool parses its input (a pydantic model), calls one service function in a worker thread
(the service layer is synchronous and talks to a database and a legacy system), and maps the result
to its output model. Business rules live in ``adapter.services``; this module only knows MCP.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import anyio
import anyio.to_thread
from mcp.server import ServerRequestContext
from mcp_types import CallToolRequestParams, InputRequiredResult, ToolAnnotations
from mcp_types import Tool as ToolDefinition
from pydantic import BaseModel

from adapter.domain.confirmation import NOTHING_CONFIRMED, CommitSubject, question_text
from adapter.domain.errors import ConfirmationStale, InvalidRequest, LegacyUnavailable, error_for_code
from adapter.domain.identity import Principal
from adapter.domain.views import CommitResult
from adapter.entrypoints.mcp import schemas as s
from adapter.entrypoints.mcp.confirm import Answer, ConfirmPolicy, ask_in_session, question, read_answer
from adapter.entrypoints.mcp.eras import era_of
from adapter.services import CancelToken, Decision, ImportService

__all__ = ["Call", "Tool", "build_tools", "json_schema", "run_cancellable", "run_in_thread"]

T = TypeVar("T")

log = logging.getLogger("adapter.mcp.tools")


@dataclass(frozen=True, slots=True)
class Call:
    """One ``tools/call`` request: who asks, the request's MCP context and its raw params."""

    principal: Principal
    service: ImportService
    ctx: ServerRequestContext[Any, Any]
    params: CallToolRequestParams
    confirm: ConfirmPolicy


ToolFn = Callable[[Call, Any], Awaitable[BaseModel | InputRequiredResult]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    title: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    annotations: ToolAnnotations
    run: ToolFn
    may_ask_user: bool = False
    """It may send the client a request mid-call (elicitation): a 2025-era call answers over SSE."""

    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=json_schema(self.input_model),
            output_schema=json_schema(self.output_model),
            annotations=self.annotations,
        )


@functools.cache
def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema, built once: it costs 0.2-0.6 ms and the SDK asks for it on every call.

    Local ``$ref``s are inlined: a client validates every structured result against the output
    schema, and resolving a reference costs it more than the check itself (the status result: 63
    against 35 us in jsonschema). Our models are not recursive, so the inlined schema is finite.
    """
    return inline_refs(model.model_json_schema())


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with each ``"$ref": "#/$defs/X"`` replaced by ``X`` itself and ``$defs`` dropped."""
    definitions: dict[str, Any] = schema.get("$defs", {})

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        rest = {key: resolve(value, seen) for key, value in node.items() if key not in ("$defs", "$ref")}
        ref = node.get("$ref")
        if not (isinstance(ref, str) and ref.startswith("#/$defs/")):
            return rest if ref is None else {"$ref": ref, **rest}
        name = ref.removeprefix("#/$defs/")
        if name in seen:
            raise ValueError(f"recursive schema: {name} refers to itself")
        return {**resolve(definitions[name], (*seen, name)), **rest}  # siblings (a description) win

    return cast(dict[str, Any], resolve(schema, ()))


async def run_in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a short blocking service call off the event loop (a cancellation waits for it to end)."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


async def run_cancellable(fn: Callable[[CancelToken], T]) -> T:
    """Run a long service call that watches a cancel token.

    If the request is cancelled (the HTTP client went away, or ``notifications/cancelled`` on
    stdio), the token is set and the request stops waiting at once; the service notices the token
    before its next irreversible step and records the real outcome itself.
    """
    token = CancelToken()
    try:
        return await anyio.to_thread.run_sync(functools.partial(fn, token), abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        token.cancel()
        raise


# --- the tools -------------------------------------------------------------------------------------


async def begin_import(call: Call, args: s.BeginImportIn) -> s.BeginImportOut:
    result = await run_in_thread(
        call.service.begin,
        call.principal,
        args.target,
        idempotency_key=args.idempotency_key,
        ttl_seconds=args.ttl_seconds,
    )
    return s.BeginImportOut(
        handle=result.handle,
        status="open",
        target=result.target,
        expires_at=result.expires_at,
        record_count=result.record_count,
        replayed=result.replayed,
    )


async def add_record(call: Call, args: s.AddRecordIn) -> s.AddRecordOut:
    result = await run_in_thread(
        call.service.add, call.principal, args.handle, [args.record], idempotency_key=args.idempotency_key
    )
    return s.AddRecordOut(handle=result.handle, record_count=result.record_count, replayed=result.replayed)


async def add_records(call: Call, args: s.AddRecordsIn) -> s.AddRecordsOut:
    result = await run_in_thread(
        call.service.add, call.principal, args.handle, args.records, idempotency_key=args.idempotency_key
    )
    return s.AddRecordsOut(
        handle=result.handle,
        accepted=result.accepted,
        record_count=result.record_count,
        replayed=result.replayed,
    )


async def commit_import(call: Call, args: s.CommitImportIn) -> s.CommitImportOut | InputRequiredResult:
    """Confirm (when the policy and the client allow), then commit with progress and cancellation.

    An answer commits only what its question described (``expect``), and only once per round.
    """
    if era_of(call.ctx.protocol_version) == "legacy":
        return await _commit_legacy_era(call, args)
    answer = read_answer(call.params.request_state, call.params.input_responses, call.confirm)
    if answer is None:
        if not call.confirm.should_ask(call.ctx):
            return _commit_out(await _commit_with_progress(call, args.handle, args.idempotency_key, None))
        subject = await run_in_thread(call.service.confirmation_subject, call.principal, args.handle)
        if subject is not None:
            return question(subject, 1, None)
        try:  # nothing to ask about: the commit explains why not, or answers a replay
            return _commit_out(await _commit_unasked(call, args))
        except ConfirmationStale as became:  # it became committable since: ask about it
            if not isinstance(became.current, CommitSubject):
                raise
            return question(became.current, 1, None)
    return await _answered(call, args, answer)


async def _commit_unasked(call: Call, args: s.CommitImportIn) -> CommitResult:
    """A commit for which a question was due but there was nothing to ask about.

    It may answer from the record or refuse; if records arrived (or a commit in flight gave the
    import back) since the import was read, it raises ``ConfirmationStale`` instead of starting.
    """
    return await _commit_with_progress(call, args.handle, args.idempotency_key, NOTHING_CONFIRMED)


async def _answered(
    call: Call, args: s.CommitImportIn, answer: Answer
) -> s.CommitImportOut | InputRequiredResult:
    decision = await run_in_thread(
        call.service.record_confirmation, call.principal, answer.round_id, answer.subject, answer.decision
    )
    if decision is Decision.DECLINED:
        return _declined(args.handle, answer.subject.record_count)
    if decision is Decision.ACCEPTED:
        # A final round delivered twice must commit once, so it carries a key of its own.
        key = args.idempotency_key or f"confirmed:{answer.round_id}"
        try:
            return _commit_out(await _commit_with_progress(call, args.handle, key, answer.subject))
        except ConfirmationStale as stale:
            await run_in_thread(call.service.confirmation_stale, answer.round_id)
            current = stale.current if isinstance(stale.current, CommitSubject) else None
            if current is None or answer.round >= call.confirm.max_rounds:
                raise
            return question(current, answer.round + 1, answer.started)
    # Missing (no usable answer), or an accepted round that went stale: ask again, with today's numbers.
    if answer.round >= call.confirm.max_rounds:
        raise _ConfirmationMissing()
    current = await run_in_thread(call.service.confirmation_subject, call.principal, args.handle)
    if current is None:
        raise ConfirmationStale(None)
    return question(current, answer.round + 1, answer.started)


async def _commit_legacy_era(call: Call, args: s.CommitImportIn) -> s.CommitImportOut:
    """The 2025 era: the same policy and the same subject, asked inside this request.

    The question (``elicitation/create`` on the session) names the subject: import, target, record
    count and staged content. An accept commits only that subject (``expect``, checked in the claim
    transaction); if records were added meanwhile the user is asked again with the new figures, at
    most ``max_rounds`` times in all, then ``confirmation_stale`` as in the 2026-07-28 era. The
    question lives inside one request, so it cannot be replayed.
    """
    if not call.confirm.should_ask(call.ctx):
        return _commit_out(await _commit_with_progress(call, args.handle, args.idempotency_key, None))
    stale: ConfirmationStale | None = None
    for _ in range(call.confirm.max_rounds):
        subject = await run_in_thread(call.service.confirmation_subject, call.principal, args.handle)
        try:
            if subject is None:  # nothing to ask about: the commit explains why not, or answers a replay
                return _commit_out(await _commit_unasked(call, args))
            decision = await ask_in_session(call.ctx, question_text(subject), call.confirm)
            if decision is Decision.DECLINED:
                return _declined(args.handle, subject.record_count)
            stale = None
            if decision is Decision.ACCEPTED:
                return _commit_out(
                    await _commit_with_progress(call, args.handle, args.idempotency_key, subject)
                )
        except ConfirmationStale as changed:  # the import changed since it was read: ask again
            if not isinstance(changed.current, CommitSubject):
                raise
            stale = changed
    raise stale if stale is not None else _ConfirmationMissing()


def _declined(handle: str, record_count: int) -> s.CommitImportOut:
    return s.CommitImportOut(
        handle=handle,
        status="declined",
        operation_id=None,
        legacy_batch_id=None,
        record_count=record_count,
        replayed=False,
    )


class _ConfirmationMissing(InvalidRequest):
    def __init__(self) -> None:
        super().__init__("the confirmation was not answered; call commit_import again")


async def _commit_with_progress(
    call: Call, handle: str, key: str | None, expect: CommitSubject | None
) -> CommitResult:
    """The commit in a worker thread; its progress reports go out from the event loop, in order.

    The commit thread only queues a report (it never waits for the loop, which under load costs it
    a loop turn per report); one task sends them, and the result is returned after the last one.
    """
    session = call.ctx.session
    loop = asyncio.get_running_loop()
    reports: asyncio.Queue[tuple[float, int] | None] = asyncio.Queue()
    cancelled: list[CancelToken] = []

    async def deliver() -> None:
        while (report := await reports.get()) is not None:
            value, total = report
            if cancelled and cancelled[0].cancelled:
                continue  # after a cancellation nothing more is sent for this request
            try:
                await session.report_progress(value, total, progress_message(value, total))
            except Exception:  # a gone client must not break the commit
                log.debug("progress report failed", exc_info=True)

    def commit(token: CancelToken) -> CommitResult:
        cancelled.append(token)

        def progress(value: float, total: int) -> None:
            if not token.cancelled:
                loop.call_soon_threadsafe(reports.put_nowait, (value, total))

        return call.service.commit(
            call.principal, handle, idempotency_key=key, progress=progress, cancel=token, expect=expect
        )

    sender = loop.create_task(deliver())
    try:
        result = await run_cancellable(commit)
        reports.put_nowait(None)  # after every report the commit queued, so those are sent first
        await sender
    finally:
        sender.cancel()  # a no-op once it is done; stops it on a cancellation or an error
    return result


def progress_message(value: float, total: int) -> str:
    """The whole part is what the legacy system has taken; a fraction means it is still working."""
    sent = int(value)
    if value == sent:
        return f"{sent} of {total} records sent"
    return f"{sent} of {total} records sent; the legacy system is working on the next ones"


def _commit_out(result: CommitResult) -> s.CommitImportOut:
    if result.status == "failed":
        # COMMIT was never sent, so nothing was applied: a true failure, safe to retry.
        raise error_for_code(result.error or LegacyUnavailable.code)(_NOT_APPLIED)
    return s.CommitImportOut(
        handle=result.handle,
        status=cast(s.CommitStatus, result.status),  # "failed" is raised above; pydantic checks the rest
        operation_id=result.operation_id,
        legacy_batch_id=result.legacy_batch_id,
        record_count=result.record_count,
        replayed=result.replayed,
    )


_NOT_APPLIED = "the legacy system did not take the batch; nothing was committed, so it is safe to retry"


async def abort_import(call: Call, args: s.AbortImportIn) -> s.AbortImportOut:
    result = await run_in_thread(call.service.abort, call.principal, args.handle)
    return s.AbortImportOut(handle=result.handle, status=result.status)


async def get_import_status(call: Call, args: s.GetImportStatusIn) -> s.ImportStatusOut:
    view = await call.service.status_async(call.principal, args.handle)
    return s.ImportStatusOut(
        handle=view.handle,
        import_id=view.import_id,
        status=view.status,
        target=view.target,
        record_count=view.record_count,
        expires_at=view.expires_at,
        operations=[
            s.OperationSummaryOut(
                operation_id=o.operation_id, kind=o.kind, status=o.status, created_at=o.created_at
            )
            for o in view.operations
        ],
    )


async def get_operation_status(call: Call, args: s.GetOperationStatusIn) -> s.OperationStatusOut:
    view = await run_in_thread(
        call.service.operation_status,
        call.principal,
        operation_id=args.operation_id,
        idempotency_key=args.idempotency_key,
    )
    return s.OperationStatusOut(
        operation_id=view.operation_id,
        kind=view.kind,
        status=view.status,
        result=view.result,
        history=[
            s.HistoryEntryOut(at=h.at, event=h.event, state=h.state, detail=h.detail) for h in view.history
        ],
    )


def _hints(*, read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def build_tools(handle_ttl_seconds: int) -> tuple[Tool, ...]:
    """The tool catalogue. begin_import's description states the handle lifetime in force."""
    return (
        Tool(
            "begin_import",
            "Begin an import",
            "Open an import into the legacy system and return its handle. Pass the handle to add_record, "
            f"add_records and commit_import. The handle expires {handle_ttl_seconds} seconds after begin "
            "unless ttl_seconds says otherwise; an expired import cannot be committed.",
            s.BeginImportIn,
            s.BeginImportOut,
            _hints(read_only=False, destructive=False, idempotent=False),
            begin_import,
        ),
        Tool(
            "add_record",
            "Add one record",
            "Stage one record (a JSON object) in an open import, after those already staged.",
            s.AddRecordIn,
            s.AddRecordOut,
            _hints(read_only=False, destructive=False, idempotent=False),
            add_record,
        ),
        Tool(
            "add_records",
            "Add records",
            "Stage 1 to 1000 records in an open import, in order, all or none.",
            s.AddRecordsIn,
            s.AddRecordsOut,
            _hints(read_only=False, destructive=False, idempotent=False),
            add_records,
        ),
        Tool(
            "commit_import",
            "Commit an import",
            "Commit every staged record as one batch in the legacy system. May ask the user to confirm. "
            "Reports progress. A commit whose outcome could not be observed is reported as outcome_unknown "
            "(never as failed); check it with get_operation_status. Retrying with the same idempotency_key "
            "never commits twice.",
            s.CommitImportIn,
            s.CommitImportOut,
            _hints(read_only=False, destructive=True, idempotent=True),
            commit_import,
            may_ask_user=True,
        ),
        Tool(
            "abort_import",
            "Abort an import",
            "Abort an import: drop its staged records, or, if it was committed, void its legacy batch.",
            s.AbortImportIn,
            s.AbortImportOut,
            _hints(read_only=False, destructive=True, idempotent=True),
            abort_import,
        ),
        Tool(
            "get_import_status",
            "Import status",
            "The import's state, record count, expiry and operations.",
            s.GetImportStatusIn,
            s.ImportStatusOut,
            _hints(read_only=True, destructive=False, idempotent=True),
            get_import_status,
        ),
        Tool(
            "get_operation_status",
            "Operation status",
            "The status, result and history of an operation, by operation_id or idempotency_key.",
            s.GetOperationStatusIn,
            s.OperationStatusOut,
            _hints(read_only=True, destructive=False, idempotent=True),
            get_operation_status,
        ),
    )
