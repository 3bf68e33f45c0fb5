"""Limits that hold before anyone is authenticated: body size, Host and Origin, on every route.

Both run as the outermost ASGI layers of the HTTP app, so nothing behind them (FastAPI's body and
form parsing, the SDK's bearer-token check, the admin dependencies) sees a request they refuse:

* **Body size** (:class:`BodyLimit`): a declared ``Content-Length`` above the limit is answered 413
  at once, without reading the body; a streamed body is counted as it arrives, without buffering,
  and refused as soon as it passes the limit. ``/admin`` (whose bodies are a short reason or the
  dashboard's login form) has its own small limit. At ``/mcp`` the 413 carries a JSON-RPC error, and
  the limit is the SDK's own too (``app.py`` passes it on), so the two cannot disagree.
* **Host and Origin** (:class:`HostOriginGuard`): the DNS-rebinding defence the SDK applies at
  ``/mcp``, applied to every other route too (``/metrics``, ``/readyz``, ``/docs``,
  ``/openapi.json``, ``/admin``). A Host outside the allowlist is 421; an ``Origin`` that is neither
  the server's own (same scheme-less host as ``Host``) nor allowed is 403. The dashboard
  (``/admin/ui``) trusts only its own origin and ``ADAPTER_DASHBOARD_ALLOWED_ORIGINS``, never the
  browser-MCP origins of ``ADAPTER_ALLOWED_ORIGINS``: another port on the same host is same-site
  and would get the strict cookie. ``/healthz`` stays open for probes (it says only "ok"). The
  OAuth protected-resource metadata (``/.well-known/oauth-protected-resource...``) is a public
  document browser-based clients fetch from their own origin: its Host is checked, its Origin is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapter.entrypoints.http.callers import INVALID_REQUEST, jsonrpc_error_response

__all__ = ["BodyLimit", "HostOriginGuard", "matches"]

ADMIN_PREFIX = "/admin"
MCP_PATH = "/mcp"
DASHBOARD_PREFIX = "/admin/ui"
UNGUARDED = frozenset({"/healthz", "/mcp"})  # /mcp: the SDK checks it with the same allowlists
PUBLIC_DOCUMENTS = "/.well-known/oauth-protected-resource"  # any Origin may read them (CORS)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


class BodyLimit:
    """413 for a body above ``limit`` (``admin_limit`` under ``/admin``), counted as it streams in.

    Nothing is buffered here: the app reads the body as it always does, through a ``receive`` that
    counts. A declared ``Content-Length`` above the limit is refused before the app runs. A body
    that grows past the limit is refused at that moment (413 if the app has not answered yet) and
    the app sees a disconnect, so it stops reading. An unauthenticated request is refused by the
    auth layer without reading its body at all.
    """

    def __init__(self, app: ASGIApp, *, limit: int, admin_limit: int) -> None:
        self.app = app
        self.limit = limit
        self.admin_limit = admin_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.admin_limit if _under(scope["path"], ADMIN_PREFIX) else self.limit
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(scope, receive, send, limit)
            return
        state = {"received": 0, "started": False, "refused": False}

        async def counting_receive() -> Message:
            if state["refused"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    state["refused"] = True
                    if not state["started"]:
                        await _too_large(scope, receive, send, limit)
                        state["started"] = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if state["refused"]:
                return  # the 413 went out (or the response was already under way): drop the rest
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        await self.app(scope, counting_receive, guarded_send)


async def _too_large(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    if scope["path"].rstrip("/") == MCP_PATH:  # an MCP client reads a JSON-RPC error
        message = f"Request body too large: at most {limit} bytes (ADAPTER_MAX_BODY_BYTES={limit})"
        for part in jsonrpc_error_response(413, INVALID_REQUEST, message, {"limit": limit}):
            await send(part)
        return
    response = PlainTextResponse("Request body too large", status_code=413, headers={"Connection": "close"})
    await response(scope, receive, send)


def matches(value: str, allowed: Sequence[str]) -> bool:
    """``value`` is listed exactly, or matches a ``base:*`` pattern (any port), as in the SDK."""
    for pattern in allowed:
        if value == pattern:
            return True
        if pattern.endswith(":*") and value.startswith(pattern[:-2] + ":"):
            return True
    return False


class HostOriginGuard:
    """421 for an unknown Host, 403 for a foreign Origin, on every route but ``/mcp`` and ``/healthz``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Sequence[str],
        allowed_origins: Sequence[str],
        dashboard_origins: Sequence[str],
    ) -> None:
        self.app = app
        self.allowed_hosts = list(allowed_hosts)
        self.allowed_origins = list(allowed_origins)
        self.dashboard_origins = list(dashboard_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") in UNGUARDED:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not host or not matches(host, self.allowed_hosts):
            await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
            return
        origin = headers.get("origin")
        public = _under(scope["path"], PUBLIC_DOCUMENTS)
        if origin is not None and not public and not self._origin_ok(scope["path"], origin, host):
            await PlainTextResponse("Invalid Origin header", status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _origin_ok(self, path: str, origin: str, host: str) -> bool:
        if urlsplit(origin).netloc.lower() == host.lower():  # the server's own pages
            return True
        if _under(path, DASHBOARD_PREFIX):
            return origin in self.dashboard_origins
        return matches(origin, self.allowed_origins)
