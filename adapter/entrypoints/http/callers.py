"""What one caller's requests may cost the MCP endpoint, charged to that caller (after authentication).

Runs inside the SDK's app, right after its bearer-token check (:func:`install_caller_gate`), so it
knows the principal and an unauthenticated request passes through unread to the SDK's 401:

* **The shape of a body** (:class:`~adapter.entrypoints.http.shape.JsonShape`): each chunk is counted
  as the SDK reads it; past ``ADAPTER_MAX_JSON_DEPTH`` or ``ADAPTER_MAX_JSON_ELEMENTS`` the request
  is answered 400 with a JSON-RPC error at once, before any parser builds the document.
* **What reading it cost** (:class:`RequestBudget`): every request, and the bytes and the JSON
  values of its body, are charged to the principal (``ADAPTER_MAX_REQUESTS_PER_SECOND_PER_PRINCIPAL``,
  ``ADAPTER_MAX_REQUEST_BYTES_PER_SECOND_PER_PRINCIPAL``,
  ``ADAPTER_MAX_JSON_ELEMENTS_PER_SECOND_PER_PRINCIPAL``): the request and a declared length when it
  is admitted, the values and any bytes beyond that length as they arrive. While a principal's
  budget is spent, its next request waits (unread) until the budget is paid off, if that is within
  ``MAX_WAIT`` and fewer than ``MAX_WAITING`` of its requests wait already; otherwise it is answered
  429 with ``Retry-After`` without reading the body. A caller that sends expensive bodies slows only itself.
* **One large body at a time per principal** (``CallerGate.LARGE_BODY``): the SDK parses a body on
  the event loop that every caller shares (about 20 ms for 4 MB), so eight large calls of one
  principal at once would hold everyone else up for all eight; they wait their turn instead, and the
  others' requests are served between them.
* **A 2025-era session** that would pass the principal's cap (``answers.py`` counts them) is answered
  429 the same way, after a second's wait (``SESSION_WAIT``) in which a slot may free up.

Every refusal is one JSON-RPC error (``-32029`` with ``data.code = "quota_exceeded"`` for a spent
budget or a full session cap, ``-32600`` for a body too deep or too large) and one log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapter.domain.quotas import QuotaExceeded
from adapter.entrypoints.http.shape import JsonShape, ShapeExceeded
from adapter.services.quotas import Allowance, Slots

__all__ = ["CallerGate", "RequestBudget", "caller_key", "install_caller_gate", "jsonrpc_error_response"]

QUOTA_EXCEEDED = -32029  # as subscriptions/listen answers a full quota (mcp/server.py)
INVALID_REQUEST = -32600
LOCAL_KEY = "local/local"

log = logging.getLogger("adapter.http")


class Waiting:
    """How many requests of each principal wait in this process (a bounded number may)."""

    MAX_WAITING = 16
    """Requests of one principal that may wait at once; more are refused at once (429)."""

    def __init__(self) -> None:
        self._waiting: dict[str, int] = {}

    def full(self, key: str) -> bool:
        return self._waiting.get(key, 0) >= self.MAX_WAITING

    async def sleep(self, key: str, seconds: float) -> None:
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            await asyncio.sleep(seconds)
        finally:
            left = self._waiting[key] - 1
            if left:
                self._waiting[key] = left
            else:
                del self._waiting[key]


class RequestBudget:
    """Requests, and bytes and JSON values of request bodies, a second, per principal, in this
    process."""

    MAX_WAIT = 5.0
    """Seconds a request over budget waits for it; a longer debt is refused at once (429)."""

    def __init__(self, bytes_per_second: int, elements_per_second: int, requests_per_second: int) -> None:
        self.bytes = Allowance(bytes_per_second, "max_request_bytes_per_second_per_principal")
        self.elements = Allowance(elements_per_second, "max_json_elements_per_second_per_principal")
        self.requests = Allowance(requests_per_second, "max_requests_per_second_per_principal")
        self.waiting = Waiting()
        self._meters = (
            (self.requests, "requests"),
            (self.bytes, "request bytes"),
            (self.elements, "JSON values"),
        )

    def check(self, key: str) -> None:
        """Raise QuotaExceeded (saying when to try again) while ``key``'s budget is spent."""
        for meter, what in self._meters:
            wait = meter.wait(key)
            if wait > 0:
                raise QuotaExceeded(
                    f"this principal sends more {what} a second than it may",
                    meter.setting,
                    meter.rate,
                    retry_after=wait,
                )

    async def wait_for_turn(self, key: str) -> None:
        """Wait until ``key``'s budget is paid off, when that is soon and few of its requests wait
        already; else raise QuotaExceeded at once (saying when to try again).

        A request over budget that waits costs nobody anything (its body stays unread), and a client
        that sends the next one at once cannot make the server answer refusals as fast as it sends.
        """
        wait = max(meter.wait(key) for meter, _ in self._meters)
        if wait <= 0:
            return
        if wait > self.MAX_WAIT or self.waiting.full(key):
            self.check(key)
        await self.waiting.sleep(key, wait)
        self.check(key)


def caller_key(scope: Scope, local_mode: bool) -> str | None:
    """``tenant/subject`` of the authenticated caller, the local principal's in local mode, or None
    (not authenticated: the SDK answers 401)."""
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        return user.access_token.client_id  # StaticTokenVerifier: "tenant/subject"
    return LOCAL_KEY if local_mode else None


def jsonrpc_error_response(
    status: int,
    code: int,
    message: str,
    data: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[Message, Message]:
    """The two ASGI messages of an HTTP answer carrying one JSON-RPC error (no request id)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return (
        {"type": "http.response.start", "status": status, "headers": raw},
        {"type": "http.response.body", "body": body},
    )


def _quota_messages(exc: QuotaExceeded) -> tuple[Message, Message]:
    data: dict[str, Any] = {"code": exc.code, "limit": exc.limit}
    headers = {}
    if exc.retry_after is not None:
        data["retry_after"] = round(exc.retry_after, 3)
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return jsonrpc_error_response(429, QUOTA_EXCEEDED, str(exc), data, headers)


def _refused(reason: str, key: str, status: int, setting: str) -> None:
    # One line, no request contents: who (the principal is no secret), why, which setting.
    log.info(
        json.dumps(
            {
                "event": "http.refused",
                "principal": key[:80],
                "status": status,
                "reason": reason,
                "setting": setting,
            }
        )
    )


class _Turns:
    """One large request at a time per principal: the others wait their turn (in arrival order)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class CallerGate:
    """The per-caller limits of the MCP endpoint (see the module doc)."""

    LARGE_BODY = 256 * 1024
    """A body this large (or of unknown length) waits for the caller's previous large one to be
    answered: it is parsed on the event loop every caller shares, so one caller's bodies are parsed
    one after another and everybody else's requests get their turns in between."""

    SESSION_WAIT = 1.0
    """Seconds an ``initialize`` over the principal's cap waits before its 429 (a slot may free up
    meanwhile): a flood of them is answered at the pace of its connections, not as fast as it sends."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        budget: RequestBudget,
        max_depth: int,
        max_elements: int,
        local_mode: bool,
        sessions: Slots | None = None,
    ) -> None:
        self.app = app
        self.budget = budget
        self.max_depth, self.max_elements = max_depth, max_elements
        self.local_mode = local_mode
        self.sessions = sessions  # 2025-era sessions per principal, counted by answers.py
        self._turns = _Turns()

    def _at_session_cap(self, key: str) -> bool:
        return self.sessions is not None and self.sessions.held(key) >= self.sessions.per_key

    async def _refuse_a_session(self, key: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Refused before the SDK reads the request (admission in answers.py keeps the exact count),
        after a short wait unless many of the principal's requests wait already."""
        waiting = self.budget.waiting
        if not waiting.full(key):
            await waiting.sleep(key, self.SESSION_WAIT)
            if not self._at_session_cap(key):  # a slot came free meanwhile: on as any request
                await _Request(self, key, scope, receive, send, declared=0).admit_and_run()
                return
        assert self.sessions is not None
        exc = QuotaExceeded(
            "this principal holds every 2025-era session it may; end one (DELETE) or let one idle out",
            self.sessions.per_key_setting,
            self.sessions.per_key,
        )
        _refused("sessions", key, 429, exc.setting)
        await _Request(self, key, scope, receive, send, declared=0).answer(_quota_messages(exc))

    def _opens_a_session(self, scope: Scope) -> bool:
        """Whether the SDK would try to open a 2025-era session for this request: no session id, and
        no protocol version or a handshake one (what its session manager looks at)."""
        headers = Headers(scope=scope)
        version = headers.get("mcp-protocol-version")
        return "mcp-session-id" not in headers and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = caller_key(scope, self.local_mode) if scope["type"] == "http" else None
        if key is None:
            await self.app(scope, receive, send)
            return
        if self._at_session_cap(key) and self._opens_a_session(scope):
            await self._refuse_a_session(key, scope, receive, send)
            return
        if scope["method"] != "POST":
            await _Request(self, key, scope, receive, send, declared=0).admit_and_run()
            return
        value = Headers(scope=scope).get("content-length")
        declared = int(value) if value is not None and value.isdigit() else None
        request = _Request(self, key, scope, receive, send, declared=declared or 0)
        if declared is not None and declared < self.LARGE_BODY:
            await request.admit_and_run()
            return
        async with self._turns.turn(key):
            await request.admit_and_run()


class _Request:
    """One request through the gate: charged as it is read, refused at most once."""

    def __init__(
        self, gate: CallerGate, key: str, scope: Scope, receive: Receive, send: Send, *, declared: int
    ) -> None:
        self.gate, self.key, self.scope = gate, key, scope
        self._receive, self._send = receive, send
        self.declared = declared  # charged when admitted; only what arrives beyond it is charged later
        self.received = 0
        self.started = self.refused = False
        self.shape = JsonShape(gate.max_depth, gate.max_elements)

    async def admit_and_run(self) -> None:
        try:
            await self.gate.budget.wait_for_turn(self.key)
        except QuotaExceeded as exc:
            _refused("budget", self.key, 429, exc.setting)
            await self.answer(_quota_messages(exc))
            return
        budget = self.gate.budget
        budget.requests.charge(self.key, 1)
        budget.bytes.charge(self.key, self.declared)  # at once: the next request sees it
        await self.run()

    async def run(self) -> None:
        try:
            await self.gate.app(self.scope, self.receive, self.send)
        except QuotaExceeded as exc:  # the principal's 2025-era sessions are all open (answers.py)
            _refused("sessions", self.key, 429, exc.setting)
            await self.answer(_quota_messages(exc))

    async def answer(self, messages: tuple[Message, Message]) -> None:
        self.refused = True
        if not self.started:
            self.started = True
            for message in messages:
                await self._send(message)

    async def receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] != "http.request":
            return message
        chunk = message.get("body", b"")
        before, self.received = self.received, self.received + len(chunk)
        budget = self.gate.budget
        budget.bytes.charge(self.key, max(0, self.received - max(before, self.declared)))
        elements = self.shape.elements
        try:
            self.shape.feed(chunk)
        except ShapeExceeded as exc:
            _refused("body_shape", self.key, 400, exc.setting)
            await self.answer(
                jsonrpc_error_response(400, INVALID_REQUEST, f"Invalid request: {exc}", {"limit": exc.limit})
            )
            return {"type": "http.disconnect"}
        finally:
            budget.elements.charge(self.key, self.shape.elements - elements)
        return message

    async def send(self, message: Message) -> None:
        if self.refused:
            return  # the refusal went out: drop what the app still sends
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


def install_caller_gate(mcp_app: Starlette, **options: Any) -> None:
    """Put :class:`CallerGate` into the SDK's app right after its authentication middleware.

    Starlette builds its middleware stack from ``user_middleware`` on the first request, outermost
    first; the SDK lists its bearer-token layers there (none in local mode), so appending puts the
    gate inside them and before the route's 401 check. ``tests/mcp/test_caller_limits.py`` fails if
    the gate stops seeing the caller.
    """
    if mcp_app.middleware_stack is not None:
        raise RuntimeError("install the caller gate before the app serves its first request")
    mcp_app.user_middleware.append(Middleware(CallerGate, **options))
