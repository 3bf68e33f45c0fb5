"""The commit conversation carried over MCP; its rules are in ``adapter/services/commit/confirmation.py``.

* **2026-07-28** (and the Tasks path, which confirms before it creates a task): a round is an
  ``input_required`` result with one form-mode elicitation (``confirm``) and the round (its id,
  number, first time, subject) as ``requestState``. The SDK's ``RequestStateBoundary`` seals the
  state (AES-GCM, keys derived from ADAPTER_SECRET so any worker accepts it) and binds it to the
  method, the tool's arguments, the principal and an expiry; a tampered or expired state never
  reaches this module. The client asks its user and calls ``commit_import`` again with the answer
  and the state: :func:`read_answer`.
* **The 2025 era**: the question is ``elicitation/create`` on the session, inside the request
  (:func:`ask_in_session`); it belongs to that request, so it cannot be replayed.

Who is asked depends on the form-mode elicitation the request declares (:func:`should_ask`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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

from adapter.domain.confirmation import ConfirmationRules, FormRequired, question_text
from adapter.domain.errors import InvalidRequest
from adapter.services.commit.confirmation import Decision, Round

__all__ = ["ask_in_session", "decision_of", "question", "read_answer", "should_ask", "supports_form"]

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


def should_ask(ctx: ServerRequestContext[Any, Any], rules: ConfirmationRules) -> bool:
    """Whether this request gets a question, per policy and declared capability; under ``always``
    a client without form-mode elicitation (none at all, or URL mode only) gets -32021."""
    try:
        return rules.should_ask(supports_form(ctx.session.client_capabilities))
    except FormRequired:
        raise MCPError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Server requires form-mode elicitation to confirm a commit",
            data={"requiredCapabilities": {"elicitation": {"form": {}}}},
        ) from None


def question(round_: Round) -> InputRequiredResult:
    """A round as MRTR: the server's own wording, the round sealed (by the SDK) in ``requestState``."""
    return InputRequiredResult(
        input_requests={
            CONFIRM_KEY: ElicitRequest(
                params=ElicitRequestFormParams(
                    message=question_text(round_.subject), requested_schema=CONFIRM_SCHEMA
                )
            )
        },
        request_state=json.dumps(round_.to_state()),
    )


def read_answer(
    request_state: str | None, input_responses: Mapping[str, Any] | None
) -> tuple[Round, Decision] | None:
    """The round a retry answers and its decision, or None for a first call (no state from us).

    ``request_state`` is the plaintext the SDK unsealed after verifying it.
    """
    if request_state is None:
        return None
    try:
        round_ = Round.from_state(json.loads(request_state))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise MCPError(-32602, "Invalid or expired requestState") from None
    return round_, decision_of((input_responses or {}).get(CONFIRM_KEY))


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
    ctx: ServerRequestContext[Any, Any], round_: Round, rules: ConfirmationRules
) -> Decision:
    """Ask a 2025-era client with ``elicitation/create`` on its session; accepted, declined or missing.

    A client that fails the elicitation, or a user who does not answer within ``max_seconds``, has
    not confirmed anything.
    """
    try:
        with anyio.fail_after(rules.max_seconds):
            result = await ctx.session.elicit_form(
                question_text(round_.subject), CONFIRM_SCHEMA, related_request_id=ctx.request_id
            )
    except TimeoutError:
        raise InvalidRequest("the confirmation took too long; call commit_import again") from None
    except MCPError as exc:
        raise InvalidRequest(f"the client could not ask for confirmation ({exc.error.message})") from None
    return decision_of(result.model_dump(mode="json", exclude_none=True))
