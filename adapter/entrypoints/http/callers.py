"""What one caller's requests may cost the MCP endpoint, charged to that caller (after authentication).

Runs inside the SDK's app, right after its bearer-token check (:func:`install_caller_gate`), so it
knows the principal and an unauthenticated request passes through unread to the SDK's 401:

* **The shape of a body** (:class:`~adapter.entrypoints.http.shape.JsonShape`): each chunk is counted
  as the SDK reads it; past ``ADAPTER_MAX_JSON_DEPTH`` or ``ADAPTER_MAX_JSON_ELEMENTS`` the request
  is answered 400 with a JSON-RPC error at once, before any parser builds the document.
* **What reading it cost** (:class:`RequestBudget`): the bytes and the JSON values of every body are
  charged to the principal as they arrive (``ADAPTER_MAX_REQUEST_BYTES_PER_SECOND_PER_PRINCIPAL``,
  ``ADAPTER_MAX_JSON_ELEMENTS_PER_SECOND_PER_PRINCIPAL``). While a principal's budget is spent, its
  next request is answered 429 with ``Retry-After`` without reading the body, so a caller that sends
  expensive bodies slows only itself.
* **A 2025-era session** that would pass the principal's cap (``answers.py`` counts them) is answered
  429 the same way.

Every refusal is one JSON-RPC error (``-32029`` with ``data.code = "quota_exceeded"`` for a spent
budget or a full session cap, ``-32600`` for a body too deep or too large) and one log line.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapter.domain.quotas import QuotaExceeded
from adapter.entrypoints.http.shape import JsonShape, ShapeExceeded
from adapter.services.quotas import Allowance

__all__ = ["CallerGate", "RequestBudget", "caller_key", "install_caller_gate", "jsonrpc_error_response"]

QUOTA_EXCEEDED = -32029  # as subscriptions/listen answers a full quota (mcp/server.py)
INVALID_REQUEST = -32600
LOCAL_KEY = "local/local"

log = logging.getLogger("adapter.http")


class RequestBudget:
    """Bytes and JSON values of request bodies a second, per principal, in this process."""

    def __init__(self, bytes_per_second: int, elements_per_second: int) -> None:
        self.bytes = Allowance(bytes_per_second, "max_request_bytes_per_second_per_principal")
        self.elements = Allowance(elements_per_second, "max_json_elements_per_second_per_principal")

    def check(self, key: str) -> None:
        """Raise QuotaExceeded (saying when to try again) while ``key``'s budget is spent."""
        for meter, what in ((self.bytes, "request bytes"), (self.elements, "JSON values")):
            wait = meter.wait(key)
            if wait > 0:
                raise QuotaExceeded(
                    f"this principal sends more {what} a second than it may",
                    meter.setting,
                    meter.rate,
                    retry_after=wait,
                )


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


class CallerGate:
    """The per-caller limits of the MCP endpoint (see the module doc)."""

    def __init__(
        self, app: ASGIApp, *, budget: RequestBudget, max_depth: int, max_elements: int, local_mode: bool
    ) -> None:
        self.app = app
        self.budget = budget
        self.max_depth, self.max_elements = max_depth, max_elements
        self.local_mode = local_mode

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = caller_key(scope, self.local_mode) if scope["type"] == "http" else None
        if key is None:
            await self.app(scope, receive, send)
            return
        state = {"started": False, "refused": False}

        async def answer(messages: tuple[Message, Message]) -> None:
            state["refused"] = True
            if not state["started"]:
                state["started"] = True
                for message in messages:
                    await send(message)

        if scope["method"] == "POST":
            try:
                self.budget.check(key)
            except QuotaExceeded as exc:
                _refused("budget", key, 429, exc.setting)
                await answer(_quota_messages(exc))
                return
        shape = JsonShape(self.max_depth, self.max_elements)

        async def charged_receive() -> Message:
            if state["refused"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] != "http.request":
                return message
            chunk = message.get("body", b"")
            before = shape.elements
            try:
                shape.feed(chunk)
            except ShapeExceeded as exc:
                _refused("body_shape", key, 400, exc.setting)
                await answer(
                    jsonrpc_error_response(
                        400, INVALID_REQUEST, f"Invalid request: {exc}", {"limit": exc.limit}
                    )
                )
                return {"type": "http.disconnect"}
            finally:
                self.budget.bytes.charge(key, len(chunk))
                self.budget.elements.charge(key, shape.elements - before)
            return message

        async def guarded_send(message: Message) -> None:
            if state["refused"]:
                return  # the refusal went out: drop what the app still sends
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, charged_receive, guarded_send)
        except QuotaExceeded as exc:  # the principal's 2025-era sessions are all open (answers.py)
            _refused("sessions", key, 429, exc.setting)
            await answer(_quota_messages(exc))


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
