"""Questions a server asks during a call (MRTR ``input_required`` rounds), put to the application.

Each call's rounds are driven by that call alone (its answers and its ``requestState`` are local to
it), so two calls asking at once can never swap answers. Form questions are rendered by the
application; a URL question is shown with its target domain and purpose and needs the user's consent;
a domain outside the server's rule is declined without asking. Decline and cancel go back to the server
as the user's answer and are never retried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from mcp_types import ElicitRequest, ElicitRequestURLParams, ElicitResult

__all__ = ["ElicitationHandler", "Question", "answer"]


@dataclass(frozen=True)
class Question:
    """What the application shows: who asks, in which call, and what."""

    server: str
    principal: str
    tool: str
    call_id: str
    key: str
    mode: str  # "form" or "url"
    message: str
    schema: dict[str, Any] | None = None
    url: str | None = None
    domain: str | None = None


ElicitationHandler = Callable[[Question], Awaitable[ElicitResult]]


async def answer(
    handler: ElicitationHandler | None,
    *,
    server: str,
    principal: str,
    tool: str,
    call_id: str,
    key: str,
    request: ElicitRequest,
    url_domains: set[str],
) -> ElicitResult:
    """The user's answer to one question (decline when nobody can be asked or the domain is not allowed)."""
    params = request.params
    if handler is None:
        return ElicitResult(action="decline")
    if isinstance(params, ElicitRequestURLParams):
        domain = urlparse(params.url).hostname or ""
        if urlparse(params.url).scheme != "https" or domain not in url_domains:
            return ElicitResult(action="decline")
        question = Question(
            server, principal, tool, call_id, key, "url", params.message, url=params.url, domain=domain
        )
    else:
        schema = dict(params.requested_schema)
        question = Question(server, principal, tool, call_id, key, "form", params.message, schema=schema)
    return await handler(question)
