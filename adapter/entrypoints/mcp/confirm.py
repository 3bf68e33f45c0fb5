"""Confirmation of a commit with a form-mode elicitation (a multi round-trip request, MRTR).

(A legacy-era session, 2025-11-25 and before, is asked inside the request instead: see
:func:`ask_in_session`. The policy and the question are the same in both eras.)

Round 1 answers ``input_required`` with one question (``confirm``) and a ``requestState``; the
client asks its user and calls ``commit_import`` again with the answer and the state. The SDK's
``RequestStateBoundary`` seals the state (AES-GCM, keys derived from ADAPTER_SECRET so any worker
accepts it) and binds it to the method, the tool's arguments, the principal and an expiry; a
tampered or expired state never reaches this module. Here we add what the SDK cannot know: the
round's id (answered once, recorded by the service layer), how many rounds were asked and since
when, and the subject the question described (import, target, record count), which the commit
must still match. The business rules are in ``adapter.services.confirmation`` and
``adapter.domain.confirmation``; this module only knows the MCP shapes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    ClientCapabilities,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)

from adapter.domain.confirmation import CommitSubject, question_text
from adapter.domain.errors import InvalidRequest
from adapter.services import Decision
from adapter.services.confirmation import new_round_id

__all__ = [
    "Answer",
    "ConfirmPolicy",
    "ask_in_session",
    "decision_of",
    "question",
    "read_answer",
    "supports_form",
]

CONFIRM_KEY = "confirm"
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {
            "type": "boolean",
            "title": "Commit now",
            "description": "Commit is final in the legacy system; it can only be voided.",
        }
    },
    "required": ["confirm"],
}
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021


def supports_form(capabilities: ClientCapabilities | None) -> bool:
    """Whether the client declared form-mode elicitation: ``elicitation: {}`` or ``{form: ...}``.

    ``{url: ...}`` alone declares URL mode only, and such a client must not be sent a form.
    """
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


@dataclass(frozen=True, slots=True)
class ConfirmPolicy:
    mode: str  # "when-supported" | "always" | "never"
    max_rounds: int
    max_seconds: int

    def should_ask(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether this request gets a confirmation question, per policy and declared capability.

        A client without form-mode elicitation (none at all, or URL mode only) is committed for
        without a question under ``when-supported`` and refused with -32021 under ``always``.
        """
        if self.mode == "never":
            return False
        if supports_form(ctx.session.client_capabilities):
            return True
        if self.mode == "always":
            raise MCPError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                "Server requires form-mode elicitation to confirm a commit",
                data={"requiredCapabilities": {"elicitation": {"form": {}}}},
            )
        return False


@dataclass(frozen=True, slots=True)
class Answer:
    """What the client's retry carried, and what the round it answers had asked."""

    decision: Decision
    round_id: str
    round: int
    started: float
    subject: CommitSubject


def question(subject: CommitSubject, round_: int, started: float | None) -> InputRequiredResult:
    """A new round: a fresh round id, the subject sealed with it, the server's own wording."""
    state = {
        "round_id": new_round_id(),
        "round": round_,
        "started": started or time.time(),
        "subject": subject.to_state(),
    }
    return InputRequiredResult(
        input_requests={
            CONFIRM_KEY: ElicitRequest(
                params=ElicitRequestFormParams(
                    message=question_text(subject),
                    requested_schema=CONFIRM_SCHEMA,
                )
            )
        },
        request_state=json.dumps(state),
    )


def read_answer(
    request_state: str | None, input_responses: Mapping[str, Any] | None, policy: ConfirmPolicy
) -> Answer | None:
    """The answer of a retry, or None for a first round (no state from us).

    ``request_state`` is the plaintext the SDK unsealed after verifying it.
    """
    if request_state is None:
        return None
    try:
        state = json.loads(request_state)
        round_id, round_, started = str(state["round_id"]), int(state["round"]), float(state["started"])
        subject = CommitSubject.from_state(state["subject"])
    except (ValueError, KeyError, TypeError):
        raise MCPError(-32602, "Invalid or expired requestState") from None
    if time.time() - started > policy.max_seconds:
        raise InvalidRequest("the confirmation took too long; call commit_import again")
    response = (input_responses or {}).get(CONFIRM_KEY)
    return Answer(decision_of(response), round_id, round_, started, subject)


def decision_of(response: object) -> Decision:
    """An elicitation result as a decision: accept with ``confirm: true`` is the only yes."""
    try:
        result = ElicitResult.model_validate(response)
    except Exception:
        return Decision.MISSING
    if result.action in ("decline", "cancel"):
        return Decision.DECLINED
    content = result.content or {}
    if content.get("confirm") is True:
        return Decision.ACCEPTED
    if content.get("confirm") is False:
        return Decision.DECLINED
    return Decision.MISSING


async def ask_in_session(
    ctx: ServerRequestContext[Any, Any], message: str, policy: ConfirmPolicy
) -> Decision:
    """Ask a legacy-era client with ``elicitation/create`` on its session; accepted, declined or missing.

    The question lives inside one ``tools/call`` (the answer comes back on the same session), so it
    is single-use by construction. A client that fails the elicitation, or a user who does not answer
    within ``max_seconds``, has not confirmed anything.
    """
    try:
        with anyio.fail_after(policy.max_seconds):
            result = await ctx.session.elicit_form(message, CONFIRM_SCHEMA, related_request_id=ctx.request_id)
    except TimeoutError:
        raise InvalidRequest("the confirmation took too long; call commit_import again") from None
    except MCPError as exc:
        raise InvalidRequest(f"the client could not ask for confirmation ({exc.error.message})") from None
    return decision_of(result.model_dump(mode="json", exclude_none=True))
