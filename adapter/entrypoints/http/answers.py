"""2025-era sessions: each request answered as plain JSON unless it may need the stream, and at
most ``ADAPTER_MAX_LEGACY_SESSIONS_PER_PRINCIPAL`` of them per principal.

A 2025-era POST may be answered with ``application/json`` (one body) or ``text/event-stream`` (an
SSE stream that can carry progress and server requests before the result); the spec leaves the
choice to the server for every request, and clients must take both. The SDK's session transport
makes the choice once per server (``json_response``). The kit needs SSE for the calls that report
progress or ask the user (``commit_import``'s confirmation), but the SSE response costs the SDK a
task, framing and one more socket send per call: a status call over a 2025-era session took 1.4x
to 2.2x the same call in the 2026-07-28 era, and 1.0x with a JSON answer.

So this module lets each request choose: a ``tools/call`` whose ``_meta`` carries a
``progressToken``, or of a tool that may ask the user (:func:`streamed_tools`), is answered over
SSE as before; everything else (status reads, adds, lists, resource reads, ``initialize``, ``ping``)
in JSON. Nothing is lost by that: a JSON answer only rules out messages tied to the request, and
such a request has none to send (the SDK also refuses, in that mode, any server request tied to
it). Notifications not tied to a request (resource updates, list changes) use the session's
standalone GET stream in both cases.

How: the transport's ``is_json_response_enabled`` flag, read by the SDK while it handles one POST,
becomes a per-request value (a context variable set for the duration of that POST's handling). The
SDK builds its transports itself, so :func:`answer_per_request` has the session manager give new
sessions this transport class; ``tests/mcp/test_legacy_answers.py`` fails if an SDK upgrade changes
what this relies on.

**Sessions per principal.** The SDK bounds only the sessions of the whole process (``max_sessions``,
``ADAPTER_LEGACY_MAX_SESSIONS``): one token could open them all and every other tenant's
``initialize`` would get 503 until they idled out. So the same admission hook counts the sessions of
each principal (``Slots``, keyed like the listen streams): at its cap, admission raises
``QuotaExceeded`` before the SDK registers anything, and the caller gate (``callers.py``) answers 429.
The session gives its slot back when its transport is terminated, however it ends (client DELETE,
idle timeout, a failed opening request, shutdown). ``tests/mcp/test_legacy_sessions.py`` proves it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar
from functools import partial

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from pydantic_core import from_json
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from adapter.services.quotas import Slots

__all__ = ["answer_per_request", "needs_stream", "session_owner"]

LOCAL_OWNER = "local/local"

_ANSWER_IN_JSON: ContextVar[bool] = ContextVar("adapter_answer_in_json", default=False)


def needs_stream(body: bytes, streamed_tools: frozenset[str]) -> bool:
    """Whether this POST body may need an SSE answer: a tool call that asked for progress or may
    ask the user. Anything unreadable keeps the SSE default (the SDK then answers the error)."""
    try:
        message = from_json(body)  # pydantic's parser: bounded recursion, no RecursionError
    except ValueError:
        return True
    if not isinstance(message, dict):
        return True
    if message.get("method") != "tools/call" or "id" not in message:
        return False
    params = message.get("params")
    if not isinstance(params, dict):
        return True
    meta = params.get("_meta")
    if isinstance(meta, dict) and meta.get("progressToken") is not None:
        return True
    return params.get("name") in streamed_tools


class _PerRequestAnswers(StreamableHTTPServerTransport):
    """The SDK's session transport, answering in JSON each POST that cannot need the stream, and
    giving its principal's session slot back when it ends."""

    streamed_tools: frozenset[str] = frozenset()
    give_back: Callable[[], None] | None = None

    @property
    def is_json_response_enabled(self) -> bool:
        return _ANSWER_IN_JSON.get()

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        # The SDK sets it only in __init__, before this class is swapped in: a later write would
        # mean an SDK that now flips it itself, and the per-request choice would no longer hold.
        raise AttributeError("is_json_response_enabled is chosen per request (answers.py)")

    async def _handle_post_request(
        self, scope: Scope, request: Request, receive: Receive, send: Send
    ) -> None:
        body = await request.body()  # Starlette keeps it: the SDK's own read gets the same bytes
        token = _ANSWER_IN_JSON.set(not needs_stream(body, self.streamed_tools))
        try:
            await super()._handle_post_request(scope, request, receive, send)
        finally:
            _ANSWER_IN_JSON.reset(token)

    async def terminate(self) -> None:
        give_back, self.give_back = self.give_back, None  # once, however often it is terminated
        if give_back is not None:
            give_back()
        await super().terminate()


def session_owner(requestor: AuthorizationContext | None) -> str:
    """The key a session is counted under: ``tenant/subject`` (the token's client id), or the local
    principal's when there is no authentication."""
    return requestor["client_id"] if requestor is not None else LOCAL_OWNER


def answer_per_request(
    manager: StreamableHTTPSessionManager, streamed_tools: Iterable[str], sessions: Slots | None = None
) -> None:
    """Have every new 2025-era session of ``manager`` choose JSON or SSE per request, and, with
    ``sessions``, take one of its principal's slots (``QuotaExceeded`` when none is free).

    ``streamed_tools`` are the tools that may send the client a request mid-call (elicitation).
    """
    if manager.json_response:
        raise ValueError("per-request answers need the SDK's SSE default (json_response=False)")
    streamed = frozenset(streamed_tools)
    admit: Callable[[AuthorizationContext | None], StreamableHTTPServerTransport | None] = (
        manager._admit_session
    )

    def admit_answering_per_request(
        requestor: AuthorizationContext | None,
    ) -> StreamableHTTPServerTransport | None:
        owner = session_owner(requestor)
        if sessions is not None:
            sessions.take(owner, "2025-era sessions")  # QuotaExceeded: nothing registered yet
        try:
            transport = admit(requestor)
        except BaseException:
            if sessions is not None:
                sessions.release(owner)
            raise
        if transport is None:  # the SDK's own limit for the process: it answers 503
            if sessions is not None:
                sessions.release(owner)
            return None
        transport.__class__ = _PerRequestAnswers
        transport.streamed_tools = streamed  # type: ignore[attr-defined]
        if sessions is not None:
            transport.give_back = partial(sessions.release, owner)  # type: ignore[attr-defined]
        return transport

    manager._admit_session = admit_answering_per_request  # type: ignore[method-assign]
