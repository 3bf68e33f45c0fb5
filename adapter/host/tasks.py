"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) as the host speaks it.

A server that advertises the extension in ``server/discover`` may answer a ``tools/call`` of a
client that declared it with a task (``resultType: "task"``) instead of waiting for the result.
The host declares it only where both hold: the server advertises it and its
:class:`~adapter.host.ServerSpec` opts in (``tasks=True``); the SDK's public seam does the
declaring (``Client(extensions=[advertise(TASKS)])``: the id goes into every request's declared
client capabilities on that connection). Following a task is ``tasks/get`` every
``pollIntervalMs``; stopping one is ``tasks/cancel``. Both go through the SDK session's public
``send_request`` with a request type whose ``name_param`` is ``taskId``, so the SDK sets the
``Mcp-Name`` header the extension requires.

This module holds the wire shapes only; :mod:`adapter.host.follow` decides what they mean for a call.
"""

from __future__ import annotations

from typing import Any, Literal

from mcp.client.extension import ClientExtension, advertise
from mcp_types import DiscoverResult, Request, RequestParams, RequestParamsMeta, Result
from pydantic import ConfigDict, Field

__all__ = [
    "TASKS",
    "CancelTask",
    "GetTask",
    "TaskParams",
    "TaskState",
    "advertises_tasks",
    "cancel_task",
    "get_task",
    "task_extensions",
]

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "cancelled", "failed"})


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


class TaskState(Result):
    """A task as ``tasks/get`` shows it (also the fields of a ``resultType: task`` answer).

    ``result`` is the inlined ``CallToolResult`` of a ``completed`` task, ``error`` the JSON-RPC
    error of a ``failed`` one. Unknown fields are kept: a later revision may add some.
    """

    model_config = ConfigDict(extra="allow")

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class _Acknowledged(Result):
    model_config = ConfigDict(extra="allow")


def advertises_tasks(discover: DiscoverResult | None) -> bool:
    """Whether a server's ``server/discover`` advertises the Tasks extension."""
    extensions = discover.capabilities.extensions if discover is not None else None
    return bool(extensions) and TASKS in (extensions or {})


def task_extensions(opted_in: bool, discover: DiscoverResult | None) -> list[ClientExtension] | None:
    """The client extensions a connection declares: Tasks where the spec opts in and the server offers it."""
    if opted_in and advertises_tasks(discover):
        return [advertise(TASKS)]
    return None


def get_task(task_id: str, meta: RequestParamsMeta) -> GetTask:
    """``tasks/get``; ``meta`` carries the request's trace span (the SDK adds the version stamp)."""
    return GetTask(params=TaskParams(taskId=task_id, _meta=meta))


def cancel_task(task_id: str, meta: RequestParamsMeta) -> CancelTask:
    return CancelTask(params=TaskParams(taskId=task_id, _meta=meta))


ACKNOWLEDGED = _Acknowledged
