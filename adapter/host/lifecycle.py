"""The call lifecycle as an explicit state machine.

A lost response is the reason this exists: the request may have been applied, so the call becomes
``outcome_unknown``, never ``failed``. ``failed`` needs evidence that nothing took effect: the server
said so (an error result, or its status tool), or the request never left the host.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from adapter.host.errors import IllegalTransition

__all__ = ["Call", "CallState", "FollowUp", "StatusAction"]


class CallState(StrEnum):
    PLANNED = "planned"
    SENT = "sent"
    RUNNING = "running"
    INPUT_REQUIRED = "input_required"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"


_S = CallState
_TRANSITIONS: dict[CallState, frozenset[CallState]] = {
    _S.PLANNED: frozenset({_S.SENT, _S.CANCELLED, _S.FAILED}),  # FAILED here: refused before sending
    _S.SENT: frozenset(
        {_S.RUNNING, _S.INPUT_REQUIRED, _S.COMPLETED, _S.FAILED, _S.OUTCOME_UNKNOWN, _S.CANCELLED}
    ),
    # RUNNING -> RUNNING: the server's status tool says it is still working on it.
    _S.RUNNING: frozenset(
        {_S.RUNNING, _S.INPUT_REQUIRED, _S.COMPLETED, _S.FAILED, _S.OUTCOME_UNKNOWN, _S.CANCELLED}
    ),
    _S.INPUT_REQUIRED: frozenset({_S.SENT, _S.CANCELLED, _S.OUTCOME_UNKNOWN}),
    # Only the server's word leaves OUTCOME_UNKNOWN (its status tool, or its task): it may confirm it
    # is still unknown, or say it is still working on it (a lost in_progress answer: RUNNING).
    _S.OUTCOME_UNKNOWN: frozenset({_S.RUNNING, _S.COMPLETED, _S.FAILED, _S.CANCELLED, _S.OUTCOME_UNKNOWN}),
    _S.COMPLETED: frozenset(),
    _S.FAILED: frozenset(),
    _S.CANCELLED: frozenset(),
}
TERMINAL = frozenset({_S.COMPLETED, _S.FAILED, _S.CANCELLED})


@dataclass(frozen=True)
class StatusAction:
    """A call the application may offer the user about an effect that is not settled.

    As ``call.status_action``: ask the server how it ended (never resend). As ``call.stop_action``:
    stop work the server still does (``ServerRule.stop_with``); an effect of its own, to be called
    through the host like any other (policy, consent, audit).
    """

    server: str
    tool: str
    arguments: dict[str, Any]
    label: str


@dataclass(frozen=True)
class FollowUp:
    """Work the server is still doing after it answered: what a later step follows to its outcome.

    ``kind`` is ``operation`` (a result with status ``in_progress`` and an ``operation_id``, asked
    after with the server's status tool, long-polled with ``OperationStatus(wait_seconds=...)``) or
    ``task`` (a ``resultType: task`` answer with a task id, asked after with ``tasks/get`` every
    ``poll_interval_ms``, as the server asked). :meth:`adapter.host.CallHandle.follow` and
    :meth:`adapter.host.Host.follow` follow it to the outcome (:mod:`adapter.host.follow`).
    """

    kind: str
    id: str
    poll_interval_ms: int | None = None


@dataclass
class Call:
    """One tool call as the host sees it; every field is safe to show (no tokens, no result contents)."""

    server: str
    principal: str
    tool: str
    qualified: str
    effectful: bool
    fingerprint: str
    trace_id: str
    idempotency_key: str | None = None
    call_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    state: CallState = CallState.PLANNED
    history: list[tuple[CallState, datetime, str]] = field(default_factory=list)
    request_ids: list[str | int] = field(default_factory=list)
    spans: list[str] = field(default_factory=list)  # one trace span per request sent
    result: Any = None
    error: str | None = None
    server_status: str | None = None
    operation_id: str | None = None
    elicitation: str | None = None  # the user's last answer to a server question: accept/decline/cancel
    status_action: StatusAction | None = None
    tenant: str = ""
    content: list[dict[str, Any]] = field(default_factory=list)  # every content block, as sent
    structured: Any = None  # structuredContent as sent (any JSON value on 2026-07-28)
    result_problem: str | None = None  # a result arrived that the host could not use, and why
    follow_up: FollowUp | None = None
    consent: str | None = None  # "asked", "pre-approved" or None (no effect)
    stop_action: StatusAction | None = None  # while running: how the server's work is stopped

    def __post_init__(self) -> None:
        self.history.append((self.state, datetime.now(UTC), "planned"))

    def move(self, to: CallState, why: str) -> None:
        """Change state; raises :class:`IllegalTransition` for a move the machine does not allow."""
        if to not in _TRANSITIONS[self.state]:
            raise IllegalTransition(f"{self.state} -> {to} ({why})")
        self.state = to
        self.history.append((to, datetime.now(UTC), why))

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    @property
    def states(self) -> list[CallState]:
        return [state for state, _, _ in self.history]
