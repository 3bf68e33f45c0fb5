"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) for clients that declare it.

A ``commit_import`` whose request declares the extension (2026-07-28, per request in
``_meta[clientCapabilities].extensions``) resolves its confirmation first, on the original request
(MRTR), then answers with a task (``resultType: "task"``) as soon as the commit is claimed: the
claim is durable, so a ``tasks/get`` for it resolves on any worker from then on. The task *is* the
commit operation: its id is the operation id (128 random bits), bound to the principal and tenant
that own it; every ``tasks/*`` request is authorized again, and another principal's task id gets
the very answer an unknown one gets (-32602).

| operation | task |
|---|---|
| ``in_progress`` | ``working``, ``"<n> of <N> records sent"`` |
| ``outcome_unknown`` | ``working``, waiting for the legacy system to confirm (never ``failed``) |
| ``needs_operator`` | ``working``, waiting for an operator |
| ``succeeded``, ``compensat*``, ``failed`` | ``completed`` with the tool result (a failure: ``isError``) |
| ``cancelled`` | ``cancelled`` |

``tasks/cancel`` is the owner's stop (``ImportService.cancel_commit``): before COMMIT the commit
stops and the import is open again; after, the real outcome stands. ``tasks/update`` is
acknowledged (a commit never asks for input once it is a task). There is no ``tasks/list`` and no
``tasks/result`` in this revision: -32601, as for any unknown method. Task notifications go out on
``subscriptions/listen`` with ``taskIds`` (``listen.py``).

Over HTTP, ``Mcp-Name`` on ``tasks/*`` names the task (the extension's routing header). The SDK
checks it only for the core name-bearing methods, so :func:`check_routing_header` does it here: a
header naming another task is refused as the SDK refuses a mismatched tool name (-32020, HTTP 400).

Built on the SDK's extension seams: an :class:`~mcp.server.extension.Extension` whose
``methods()`` serve ``tasks/*`` and whose ``intercept_tool_call`` turns the commit into a task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types import (
    HEADER_MISMATCH,
    CallToolRequestParams,
    EmptyResult,
    Notification,
    NotificationParams,
    RequestParams,
    Result,
)
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.requests import Request

from adapter.domain.errors import OperationNotFound
from adapter.domain.identity import Principal
from adapter.entrypoints.mcp.tools import run_in_thread
from adapter.services import CommitState, ImportService

__all__ = [
    "TASKS",
    "CreateTaskResult",
    "TaskNotification",
    "TasksExtension",
    "check_routing_header",
    "declares_tasks",
    "task_fields",
]

TASKS = "io.modelcontextprotocol/tasks"
MODERN = frozenset({"2026-07-28"})
INVALID_PARAMS = -32602
TaskStatus = Literal["working", "input_required", "completed", "cancelled", "failed"]

POLL_WORKING_MS = 2_000
POLL_UNKNOWN_MS = 5_000
POLL_OPERATOR_MS = 60_000


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId", min_length=1, max_length=64)


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] | None = Field(default=None, alias="inputResponses")


class _TaskFields(BaseModel):
    """The Task fields, flat on every task-carrying result and notification (camelCase on the wire)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class CreateTaskResult(Result, _TaskFields):
    result_type: Literal["task"] = "task"


class GetTaskResult(Result, _TaskFields):
    result_type: Literal["complete"] = "complete"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskNotificationParams(NotificationParams, _TaskFields):
    result: dict[str, Any] | None = None


class TaskNotification(Notification[TaskNotificationParams, Literal["notifications/tasks"]]):
    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: TaskNotificationParams


ToolResult = Callable[[CommitState], dict[str, Any]]
"""The ``CallToolResult`` (as sent) that ``commit_import`` answers for a commit in this state."""

StartTask = Callable[[ServerRequestContext[Any, Any], CallToolRequestParams], Awaitable[HandlerResult]]
"""Runs ``commit_import`` for a request that gets a task (the gateway's tool call, in task mode)."""


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request declared the extension (only 2026-07-28 requests declare per request)."""
    if ctx.protocol_version not in MODERN:
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS in capabilities.extensions)


def check_routing_header(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """Refuse a ``tasks/*`` request whose ``Mcp-Name`` header names another task (-32020).

    An intermediary routes (or authorizes) on the header; a body about another task would slip
    past it. An absent header is served: FastMCP 4.1 (``fastmcp-tasks``) sends none on ``tasks/*``,
    and no worker here needs the routing (any of them answers from the store).
    """
    request = ctx.request
    if not isinstance(request, Request):  # stdio: no headers
        return
    value = request.headers.get(MCP_NAME_HEADER)
    if value is not None and decode_header_value(value) != task_id:
        raise MCPError(HEADER_MISMATCH, f"{MCP_NAME_HEADER} header does not match the body's 'taskId'")


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def task_fields(state: CommitState, ttl_ms: int, tool_result: ToolResult) -> dict[str, Any]:
    """The task a commit operation is, as ``tasks/get`` shows it (see the module docstring)."""
    view = state.view
    fields: dict[str, Any] = {
        "task_id": view.operation_id,
        "created_at": _iso(view.created_at),
        "last_updated_at": _iso(view.updated_at),
        "ttl_ms": ttl_ms,
    }
    status = view.status
    if status == "in_progress":
        sent = view.records_sent or 0
        message = f"{sent} of {view.record_count} records sent"
        if view.stop_requested:
            message += f"; {view.stop_requested} requested, the commit stops before COMMIT"
        return {**fields, "status": "working", "status_message": message, "poll_interval_ms": POLL_WORKING_MS}
    if status == "outcome_unknown":
        message = "waiting for the legacy system to confirm whether the batch landed"
        return {**fields, "status": "working", "status_message": message, "poll_interval_ms": POLL_UNKNOWN_MS}
    if status == "needs_operator":
        code = (view.error or {}).get("code", "needs_operator")
        message = f"waiting for an operator: {code}"
        return {
            **fields,
            "status": "working",
            "status_message": message,
            "poll_interval_ms": POLL_OPERATOR_MS,
        }
    if status == "cancelled":
        message = "stopped before COMMIT; nothing was committed"
        return {**fields, "status": "cancelled", "status_message": message}
    result = tool_result(state)
    message = "committed" if not result.get("isError") else "not committed"
    return {**fields, "status": "completed", "status_message": message, "result": result}


class TasksExtension(Extension):
    """``tasks/get``, ``tasks/update``, ``tasks/cancel``, and the commit as a task."""

    identifier = TASKS

    def __init__(
        self,
        service: ImportService,
        principal: Callable[[], Principal],
        commit_tools: frozenset[str],
        start_task: StartTask,
        tool_result: ToolResult,
    ) -> None:
        self._service = service
        self._principal = principal
        self._commit_tools = commit_tools
        self._start_task = start_task
        self._tool_result = tool_result

    @property
    def ttl_ms(self) -> int:
        return int(self._service.ctx.task_ttl_seconds * 1000)

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", TaskParams, self.get, protocol_versions=MODERN),
            MethodBinding("tasks/update", UpdateTaskParams, self.update, protocol_versions=MODERN),
            MethodBinding("tasks/cancel", TaskParams, self.cancel, protocol_versions=MODERN),
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if params.name in self._commit_tools and declares_tasks(ctx):
            return await self._start_task(ctx, params)
        return await call_next(ctx)

    def created(self, state: CommitState) -> CreateTaskResult:
        """The answer of a ``commit_import`` that became a task (its first state)."""
        fields = task_fields(state, self.ttl_ms, self._tool_result)
        fields.pop("result", None)
        return CreateTaskResult.model_validate(fields)

    async def detailed(self, principal: Principal, task_id: str) -> dict[str, Any] | None:
        """The task as ``tasks/get`` and ``notifications/tasks`` carry it; None if not the caller's."""
        try:
            state = await self._run(self._service.commit_state, principal, task_id)
        except OperationNotFound:
            return None
        return task_fields(state, self.ttl_ms, self._tool_result)

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> GetTaskResult:
        check_routing_header(ctx, params.task_id)
        require_client_extension(ctx, TASKS)
        fields = await self.detailed(self._principal(), params.task_id)
        if fields is None:
            raise _unknown()
        return GetTaskResult.model_validate(fields)

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> EmptyResult:
        """A commit task never waits for input: answers for keys never issued are ignored (the spec)."""
        check_routing_header(ctx, params.task_id)
        require_client_extension(ctx, TASKS)
        if await self.detailed(self._principal(), params.task_id) is None:
            raise _unknown()
        return EmptyResult(result_type="complete")

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> EmptyResult:
        """Acknowledged once the stop is recorded; the task ends ``cancelled`` if it stopped before
        COMMIT, else as the commit really ended (cooperative, as the extension says)."""
        check_routing_header(ctx, params.task_id)
        require_client_extension(ctx, TASKS)
        try:
            await self._run(self._service.cancel_commit, self._principal(), params.task_id)
        except OperationNotFound:
            raise _unknown() from None
        return EmptyResult(result_type="complete")

    @staticmethod
    async def _run(
        fn: Callable[[Principal, str], CommitState], principal: Principal, task_id: str
    ) -> CommitState:
        return await run_in_thread(fn, principal, task_id)


def _unknown() -> MCPError:
    return MCPError(INVALID_PARAMS, "Failed to retrieve task: Task not found")
