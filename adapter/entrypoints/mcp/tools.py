"""The MCP tools: thin translations between tool arguments and the service layer.

Each tool parses its input (a pydantic model), calls one service function in a worker thread
(the service layer is synchronous and talks to a database and a legacy system), and maps the result
to its output model. Business rules live in ``adapter.services``; this module only knows MCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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

from adapter.domain.errors import AdapterError, ConfirmationStale, LegacyUnavailable, error_for_code
from adapter.domain.identity import Principal
from adapter.domain.views import CommitResult
from adapter.entrypoints.mcp import schemas as s
from adapter.entrypoints.mcp.confirm import ask_in_session, question, read_answer, should_ask
from adapter.entrypoints.mcp.eras import era_of
from adapter.services import CancelToken, CommitRun, ImportService
from adapter.services.commit.confirmation import Ask, Declined, Proceed, Purpose

__all__ = [
    "Call",
    "StartTask",
    "Tool",
    "build_tools",
    "commit_and_wait",
    "commit_out",
    "json_schema",
    "run_cancellable",
    "run_in_thread",
    "start_commit",
]

T = TypeVar("T")

log = logging.getLogger("adapter.mcp.tools")


StartTask = Callable[["Call", str, Proceed], Awaitable[BaseModel]]
"""Starts a confirmed commit as a task and answers with it (``tasks.py``): for a request that
declared the Tasks extension."""


@dataclass(frozen=True, slots=True)
class Call:
    """One ``tools/call`` request: who asks, the request's MCP context and its raw params."""

    principal: Principal
    service: ImportService
    ctx: ServerRequestContext[Any, Any]
    params: CallToolRequestParams
    wait_seconds: float
    """How long the request waits for a commit or a status change (``ADAPTER_COMMIT_WAIT_SECONDS``)."""
    start_task: StartTask | None = None


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
    may_become_task: bool = False
    """A request that declared the Tasks extension may get a task for it (``tasks.py``)."""

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


async def replace_records(call: Call, args: s.ReplaceRecordsIn) -> s.ReplaceRecordsOut:
    replacements = [(item.position, item.record) for item in args.records]
    result = await run_in_thread(
        call.service.replace, call.principal, args.handle, replacements, idempotency_key=args.idempotency_key
    )
    return s.ReplaceRecordsOut(
        handle=result.handle,
        replaced=result.replaced,
        record_count=result.record_count,
        replayed=result.replayed,
    )


async def commit_import(call: Call, args: s.CommitImportIn) -> BaseModel | InputRequiredResult:
    """Drive the commit conversation (``services/commit/confirmation.py``), then commit.

    The commit starts as the server's work; the answer comes when it ends or after the wait budget
    (``in_progress``), or, for a request that declared the Tasks extension, at once as a task
    (``call.start_task``).
    """

    async def commit(step: Proceed) -> BaseModel:
        if call.start_task is not None:
            return await call.start_task(call, args.handle, step)
        return commit_out(await commit_and_wait(call, args.handle, step), call.wait_seconds)

    return await converse(call, args.handle, args.idempotency_key, "commit", commit, _declined(args.handle))


async def converse(
    call: Call,
    handle: str,
    key: str | None,
    purpose: Purpose,
    act: Callable[[Proceed], Awaitable[BaseModel]],
    declined: Callable[[int], BaseModel],
) -> BaseModel | InputRequiredResult:
    """Carry the conversation's questions and answers over MCP until it says to act, then ``act``.

    2026-07-28: each question is an ``input_required`` round, answered by the client's retry. The
    2025 era: each question is asked on the session inside this request. An act that finds the
    import changed since it was shown (``ConfirmationStale``) asks again with today's numbers.
    """
    conversation = call.service.conversation
    in_session = era_of(call.ctx.protocol_version) == "legacy"
    answer = None if in_session else read_answer(call.params.request_state, call.params.input_responses)
    step: Ask | Proceed | Declined
    if answer is None:
        ask = should_ask(call.ctx, conversation.rules)
        step = await run_in_thread(
            conversation.start, call.principal, handle, key=key, ask=ask, purpose=purpose
        )
    else:
        step = await run_in_thread(conversation.answer, call.principal, handle, *answer, key=key)
    while True:
        if isinstance(step, Declined):
            return declined(step.record_count)
        if isinstance(step, Ask):
            if not in_session:
                return question(step.round)
            decision = await ask_in_session(call.ctx, step.round, conversation.rules)
            step = await run_in_thread(
                conversation.answer, call.principal, handle, step.round, decision, key=key
            )
            continue
        try:
            return await act(step)
        except ConfirmationStale as stale:  # the import changed since it was shown: ask again
            step = await run_in_thread(conversation.stale, step.round, stale)


async def commit_and_wait(call: Call, handle: str, step: Proceed) -> CommitResult:
    """Start the commit and wait for it at most the wait budget, forwarding its progress.

    A commit already running (a repeat with the same key, or of the same import) is waited for the
    same way, and answered from the record.
    """
    started = await start_commit(call, handle, step)
    if isinstance(started, CommitResult):
        if started.status != "in_progress" or started.operation_id is None:
            return started
        view = await call.service.operation_status_async(
            call.principal, operation_id=started.operation_id, wait_seconds=call.wait_seconds
        )
        if view.status == "in_progress":
            return dataclasses.replace(started, records_sent=view.records_sent)
        state = await run_in_thread(call.service.commit_state, call.principal, started.operation_id)
        return dataclasses.replace(state.answer, replayed=True)
    return await _wait_for_run(call, started)


async def start_commit(call: Call, handle: str, step: Proceed) -> CommitRun | CommitResult:
    return await run_in_thread(
        call.service.start_commit, call.principal, handle, idempotency_key=step.key, expect=step.expect
    )


async def _wait_for_run(call: Call, run: CommitRun) -> CommitResult:
    """The run's result, or ``in_progress`` after the wait budget; its progress goes out from the
    event loop, in order, and stops at the answer. A cancellation of this request before the answer
    stops the commit (before COMMIT); after the answer nothing but the owner can stop it.

    The commit thread only queues a report (it never waits for the loop, which under load costs it
    a loop turn per report); one task sends them, and the answer is returned after the last one.
    """
    session = call.ctx.session
    loop = asyncio.get_running_loop()
    reports: asyncio.Queue[tuple[float, int] | None] = asyncio.Queue()
    ended: asyncio.Future[None] = loop.create_future()

    def queue(value: float, total: int) -> None:
        loop.call_soon_threadsafe(reports.put_nowait, (value, total))

    def end() -> None:
        if not ended.done():
            ended.set_result(None)

    def wake(_: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(end)

    async def deliver() -> None:
        while (report := await reports.get()) is not None:
            value, total = report
            try:
                await session.report_progress(value, total, progress_message(value, total))
            except Exception:  # a gone client must not break the commit
                log.debug("progress report failed", exc_info=True)

    unwatch = run.watch(queue)
    run.done.add_done_callback(wake)
    sender = loop.create_task(deliver())
    try:
        with anyio.move_on_after(call.wait_seconds):
            await ended
        unwatch()
        reports.put_nowait(None)  # after every report already queued, so those are sent first
        await sender
    except anyio.get_cancelled_exc_class():
        run.cancel()  # the caller went away before the answer: stop before COMMIT
        raise
    finally:
        unwatch()
        sender.cancel()  # a no-op once it is done; stops it on a cancellation or an error
    if run.done.done():
        return run.done.result()
    return CommitResult(
        handle=run.claim.handle,
        status="in_progress",
        operation_id=run.operation_id,
        legacy_batch_id=None,
        record_count=run.claim.total,
        replayed=False,
        records_sent=run.sent,
    )


def progress_message(value: float, total: int) -> str:
    """The whole part is what the legacy system has taken; a fraction means it is still working."""
    sent = int(value)
    if value == sent:
        return f"{sent} of {total} records sent"
    return f"{sent} of {total} records sent; the legacy system is working on the next ones"


def _declined(handle: str) -> Callable[[int], BaseModel]:
    def declined(record_count: int) -> s.CommitImportOut:
        return s.CommitImportOut(
            handle=handle,
            status="declined",
            operation_id=None,
            legacy_batch_id=None,
            record_count=record_count,
            replayed=False,
            message="The user declined; nothing was committed and the import is still open.",
        )

    return declined


def commit_out(result: CommitResult, wait_seconds: float) -> s.CommitImportOut:
    """A commit answer as the tool's result; ``failed`` (COMMIT never sent) is raised as its error."""
    if result.status == "failed":
        raise _not_applied(result)
    return s.CommitImportOut(
        handle=result.handle,
        status=cast(s.CommitStatus, result.status),  # "failed" is raised above; pydantic checks the rest
        operation_id=result.operation_id,
        legacy_batch_id=result.legacy_batch_id,
        record_count=result.record_count,
        replayed=result.replayed,
        records_sent=result.records_sent,
        message=next_step(result, wait_seconds),
    )


def next_step(result: CommitResult, wait_seconds: float) -> str | None:
    """What the model should do next, in words, for an answer that is not final."""
    follow = (
        f'Call get_operation_status with operation_id "{result.operation_id}" and wait_seconds '
        f"{wait_seconds:g}, again until its status is no longer {{status}}"
    )
    if result.status == "in_progress":
        sent = (
            f" ({result.records_sent} of {result.record_count} records sent so far)"
            if result.records_sent
            else ""
        )
        return (
            f"The commit goes on in the background on the server{sent}. Do not call commit_import again. "
            + follow.format(status="in_progress")
            + ": succeeded means committed. To stop it, call abort_import (before COMMIT nothing lands; "
            "after, the batch is voided)."
        )
    if result.status == "outcome_unknown":
        return (
            "The legacy system has not confirmed whether the batch landed; it is being asked. Do not commit "
            "again. " + follow.format(status="outcome_unknown") + "."
        )
    if result.status == "cancelled":
        return "The commit stopped before COMMIT; nothing was committed and the import is open again."
    return None


def _not_applied(result: CommitResult) -> AdapterError:
    """A commit that never sent COMMIT, as its error: why, which record, and whether a retry helps.

    Nothing was applied. The details (its operation id, the port's refusal) go in the result's
    structured content as well, so a model or a host can act on them without parsing the text."""
    kind = error_for_code(result.error or LegacyUnavailable.code)
    refusal = result.refusal
    said = ""
    if refusal is not None:
        where = [f"record {refusal['position']}"] if refusal.get("position") is not None else []
        where += [f"field {refusal['field']!r}"] if refusal.get("field") is not None else []
        said = f"{', '.join(where) + ': ' if where else ''}{refusal['code']}: {refusal['message']}. "
    if kind.retry_helps:
        advice = "It is safe to retry; the same idempotency_key never commits twice."
    elif refusal is not None and refusal.get("position") is not None:
        advice = (
            f"Retrying unchanged will fail the same way: correct record {refusal['position']} with "
            "replace_records (its position counts from 0) and commit again, or abort_import."
        )
    else:
        advice = "Retrying unchanged will not help: change the import (replace_records) or abort_import."
    message = (
        f"{said}The legacy system did not take the batch; nothing was committed "
        f"(operation {result.operation_id}). {advice}"
    )
    details = {"operation_id": result.operation_id, "retry_helps": kind.retry_helps, "refusal": refusal}
    return kind(message, details=details)


async def abort_import(call: Call, args: s.AbortImportIn) -> BaseModel | InputRequiredResult:
    """Abort; when it may void a batch that landed, the conversation asks first (as for a commit)."""

    async def abort(step: Proceed) -> BaseModel:
        result = await run_in_thread(
            call.service.abort,
            call.principal,
            args.handle,
            wait_seconds=call.wait_seconds,
            expect=step.expect,
        )
        message = None
        if result.abort_requested:
            message = (
                "The import was still committing. The abort is recorded: the commit stops before COMMIT and "
                "nothing lands, or, if COMMIT was already sent, its batch is voided once it is known to have "
                f'landed. Call get_import_status with handle "{args.handle}" and wait_seconds '
                f"{call.wait_seconds:g} to see the end (aborted or compensated)."
            )
        return s.AbortImportOut(
            handle=result.handle,
            status=result.status,
            abort_requested=result.abort_requested,
            message=message,
        )

    def declined(record_count: int) -> s.AbortImportOut:
        message = "The user declined; nothing was voided or stopped."
        return s.AbortImportOut(handle=args.handle, status="declined", message=message)

    return await converse(call, args.handle, None, "void", abort, declined)


async def get_import_status(call: Call, args: s.GetImportStatusIn) -> s.ImportStatusOut:
    view = await call.service.status_async(call.principal, args.handle, wait_seconds=args.wait_seconds or 0)
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
        earlier_operations=view.earlier_operations,
    )


async def get_operation_status(call: Call, args: s.GetOperationStatusIn) -> s.OperationStatusOut:
    view = await call.service.operation_status_async(
        call.principal,
        operation_id=args.operation_id,
        idempotency_key=args.idempotency_key,
        wait_seconds=args.wait_seconds or 0,
    )
    return s.OperationStatusOut(
        operation_id=view.operation_id,
        kind=view.kind,
        status=view.status,
        result=view.result,
        error=view.error,
        records_sent=view.records_sent if view.status == "in_progress" else None,
        record_count=view.record_count,
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


def build_tools(handle_ttl_seconds: int, wait_seconds: float = 4.0) -> tuple[Tool, ...]:
    """The tool catalogue. Descriptions state the handle lifetime and the wait budget in force."""
    wait = f"{wait_seconds:g}"
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
            "replace_records",
            "Replace staged records",
            "Put records in place of staged ones in an open import, by position (counted from 0, as a "
            "refusal names the record the legacy system would not take), all or none. A commit asked "
            "about before the replacement asks again.",
            s.ReplaceRecordsIn,
            s.ReplaceRecordsOut,
            _hints(read_only=False, destructive=False, idempotent=False),
            replace_records,
        ),
        Tool(
            "commit_import",
            "Commit an import",
            "Commit every staged record as one batch in the legacy system. May ask the user to confirm. "
            "Reports progress. A commit still running after "
            f"{wait} seconds answers status in_progress with its operation_id and goes on in the background: "
            "follow it with get_operation_status (wait_seconds) instead of calling commit_import again. A "
            "commit whose outcome could not be observed is reported as outcome_unknown (never as failed); "
            "check it with get_operation_status. Retrying with the same idempotency_key never commits twice.",
            s.CommitImportIn,
            s.CommitImportOut,
            _hints(read_only=False, destructive=True, idempotent=True),
            commit_import,
            may_ask_user=True,
            may_become_task=True,
        ),
        Tool(
            "abort_import",
            "Abort an import",
            "Abort an import: drop its staged records, or, if it was committed, void its legacy batch. A "
            "commit still running is stopped before COMMIT, or its batch voided once it landed. May ask "
            "the user to confirm before anything in the legacy system can be voided.",
            s.AbortImportIn,
            s.AbortImportOut,
            _hints(read_only=False, destructive=True, idempotent=True),
            abort_import,
            may_ask_user=True,
        ),
        Tool(
            "get_import_status",
            "Import status",
            "The import's state, record count, expiry and operations. With wait_seconds (at most "
            f"{wait}) it answers as soon as any of them changes.",
            s.GetImportStatusIn,
            s.ImportStatusOut,
            _hints(read_only=True, destructive=False, idempotent=True),
            get_import_status,
        ),
        Tool(
            "get_operation_status",
            "Operation status",
            "The status, result and history of an operation, by operation_id or idempotency_key; a running "
            f"commit's progress. With wait_seconds (at most {wait}) it answers as soon as the status "
            "changes: "
            "call it again while the status is in_progress or outcome_unknown.",
            s.GetOperationStatusIn,
            s.OperationStatusOut,
            _hints(read_only=True, destructive=False, idempotent=True),
            get_operation_status,
        ),
    )
