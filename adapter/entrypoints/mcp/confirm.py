"""Confirmation of a commit with a form-mode elicitation (a multi round-trip request, MRTR).

(A legacy-era session, 2025-11-25 and before, is asked inside the request instead: see
:func:`ask_in_session`. The policy and the question are the same in both eras.)

Round 1 answers ``input_required`` with one question (``confirm``) and a ``requestState``; the
client asks its user and calls ``commit_import`` again with the answer and the state. The SDK's
``RequestStateBoundary`` seals the state (AES-GCM, keys derived from ADAPTER_SECRET so any worker
accepts it) and binds it to the method, the tool's arguments, the principal and an expiry; a
tampered or expired state never reaches this module. Here we add what the SDK cannot know: how many
rounds were asked, since when, and a nonce that makes a final round delivered twice commit once.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from adapter.domain.errors import InvalidRequest

__all__ = ["Answer", "ConfirmPolicy", "ask_in_session", "question", "read_answer"]

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


@dataclass(frozen=True, slots=True)
class ConfirmPolicy:
    mode: str  # "when-supported" | "always" | "never"
    max_rounds: int
    max_seconds: int

    def should_ask(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether this request gets a confirmation question, per policy and declared capability."""
        if self.mode == "never":
            return False
        capabilities = ctx.session.client_capabilities
        supports_form = capabilities is not None and capabilities.elicitation is not None
        if supports_form:
            return True
        if self.mode == "always":
            raise MCPError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                "Server requires the elicitation capability to confirm a commit",
                data={"requiredCapabilities": {"elicitation": {}}},
            )
        return False


@dataclass(frozen=True, slots=True)
class Answer:
    """What the client's retry carried: ``decision`` is accepted, declined or missing."""

    decision: str
    nonce: str
    round: int
    started: float


def question(message: str, nonce: str | None, round_: int, started: float | None) -> InputRequiredResult:
    state = {"nonce": nonce or secrets.token_hex(16), "round": round_, "started": started or time.time()}
    return InputRequiredResult(
        input_requests={
            CONFIRM_KEY: ElicitRequest(
                params=ElicitRequestFormParams(
                    message=message,
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
    raw_state = request_state
    if raw_state is None:
        return None
    try:
        state = json.loads(raw_state)
        nonce, round_, started = str(state["nonce"]), int(state["round"]), float(state["started"])
    except (ValueError, KeyError, TypeError):
        raise MCPError(-32602, "Invalid or expired requestState") from None
    if time.time() - started > policy.max_seconds:
        raise InvalidRequest("the confirmation took too long; call commit_import again")
    response = (input_responses or {}).get(CONFIRM_KEY)
    return Answer(decision=_decision(response), nonce=nonce, round=round_, started=started)


def _decision(response: object) -> str:
    try:
        result = ElicitResult.model_validate(response)
    except Exception:
        return "missing"
    if result.action in ("decline", "cancel"):
        return "declined"
    content = result.content or {}
    if content.get("confirm") is True:
        return "accepted"
    if content.get("confirm") is False:
        return "declined"
    return "missing"


async def ask_in_session(ctx: ServerRequestContext[Any, Any], message: str, policy: ConfirmPolicy) -> str:
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
    return _decision(result.model_dump(mode="json", exclude_none=True))
