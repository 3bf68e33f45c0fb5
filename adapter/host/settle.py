"""What an answer means for a call: the lifecycle moved by the evidence, never by hope.

Shared by the call flow (:mod:`adapter.host.calls`: the answer to ``tools/call``) and the follow-up
(:mod:`adapter.host.follow`: the inlined result of a completed task). A result is never a failure
of the effect unless the server says so (an error result): it is completed, or still running (an
``in_progress`` answer, a task), or unknown when the host cannot use it.
"""

from __future__ import annotations

from typing import Any

from mcp_types import CallToolResult

from adapter.host.builder import ReadResult
from adapter.host.lifecycle import Call, CallState, FollowUp, StatusAction
from adapter.host.policy import ServerRule

__all__ = ["error_text", "finish", "no_answer", "offer_status", "settle_result", "unusable"]


def _blocks(result: CallToolResult) -> list[dict[str, Any]]:
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]


def error_text(content: list[dict[str, Any]]) -> str:
    return " ".join(str(b.get("text", "")) for b in content)[:300]


def settle_result(call: Call, rule: ServerRule, read: ReadResult, *, tasks_declared: bool = False) -> None:
    """A result arrived: completed, failed (an error result), running, or unknown when unusable.

    A task answer (``resultType: task``) on a request that declared the Tasks extension is work
    the server still does: ``running``, followed with ``tasks/get``. One the host never asked for
    is a result it cannot use: the outcome is unknown, and the status tool decides.
    """
    if read.result is None:
        other = read.other or {}
        if other.get("resultType") == "task" and other.get("taskId"):
            poll = other.get("pollIntervalMs")
            call.follow_up = FollowUp(
                "task", str(other["taskId"]), poll if isinstance(poll, int) and poll >= 0 else None
            )
            if tasks_declared:
                call.move(CallState.RUNNING, f"the server answered with a task ({other.get('status')})")
                offer_status(call, rule)
                return
        call.result_problem = read.problem
        unusable(call, rule, read.problem or "an unusable result")
        return
    result = read.result
    call.content, call.structured = _blocks(result), result.structured_content
    structured = result.structured_content
    texts = [block.get("text", block) for block in call.content]
    call.result = structured if structured not in (None, {}) else texts
    if result.is_error:
        call.error = error_text(call.content)
        call.move(CallState.FAILED, "the server returned an error result")
        return
    if read.problem is not None:
        call.result_problem = read.problem
        unusable(call, rule, read.problem)
        return
    if isinstance(structured, dict) and rule.running_when is not None and rule.running_when(structured):
        call.operation_id = str(structured.get("operation_id"))
        call.follow_up = FollowUp("operation", call.operation_id)
        call.move(CallState.RUNNING, "the server is still working on it (in_progress)")
        offer_status(call, rule)
        _offer_stop(call, rule, structured)
        return
    if isinstance(structured, dict) and rule.unknown_when is not None and rule.unknown_when(structured):
        call.operation_id = structured.get("operation_id")
        no_answer(call, rule, "the server could not observe the outcome")
        return
    call.move(CallState.COMPLETED, "result received")
    finish(call)


def unusable(call: Call, rule: ServerRule, why: str) -> None:
    if call.effectful:
        no_answer(call, rule, f"a result the host cannot use ({why})")
    else:
        call.error = why
        call.move(CallState.FAILED, f"a result the host cannot use ({why})")


def no_answer(call: Call, rule: ServerRule, why: str) -> None:
    """Sent but not answered: the outcome is unknown; offer the server's status tool, never a resend."""
    call.move(CallState.OUTCOME_UNKNOWN, why)
    offer_status(call, rule)


def offer_status(call: Call, rule: ServerRule) -> None:
    """Only an action that can work is offered: without a key or operation id to ask by, the call
    has no action and the application decides (e.g. reads the resource)."""
    if not call.effectful or rule.status is None:
        return
    arguments = rule.status.arguments(call.idempotency_key, call.operation_id)
    if arguments is not None:
        call.status_action = StatusAction(
            call.server, rule.status.tool, arguments, f"Ask {call.server} whether {call.tool} took effect"
        )


def _offer_stop(call: Call, rule: ServerRule, structured: dict[str, Any]) -> None:
    offer = rule.stop_with(structured) if rule.stop_with is not None else None
    if offer is not None:
        tool, arguments = offer
        label = f"Stop the {call.tool} that {call.server} is still running ({tool}; an effect of its own)"
        call.stop_action = StatusAction(call.server, tool, arguments, label)


def finish(call: Call) -> None:
    """A settled call offers nothing more: no status question, no stop."""
    if call.finished:
        call.status_action = call.stop_action = None
