"""Request middleware: one structured log line per request; whether the SDK's spans run.

The log line carries the request id, method, tool, a hash of the handle (never the handle itself),
the outcome and the duration. It never carries tokens, arguments, record contents or elicitation
answers. What the client chose (the id, the method, the tool name) is cut to ``MAX_FIELD``
characters, so a 1 MiB tool name is not a 1 MiB log line; a request the SDK refuses as invalid
(``arguments: [1]``) is the client's mistake, ``jsonrpc_error:-32602``, not ``internal_error``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult
from opentelemetry import trace
from pydantic import ValidationError

__all__ = ["OnRequest", "RequestLog", "hash_handle", "spans_wanted"]

log = logging.getLogger("adapter.requests")

MAX_FIELD = 64
INVALID_PARAMS = -32602  # what the SDK answers for a request that fails its validation


def bounded(value: object) -> str | int | None:
    """A client-chosen value as it may be logged: a string cut to ``MAX_FIELD`` characters (marked
    with its full length), an integer as it is, anything else as its type's name."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_FIELD else f"{value[:MAX_FIELD]}...({len(value)} chars)"
    return f"<{type(value).__name__}>"


def spans_wanted(setting: bool | None) -> bool:
    """``ADAPTER_OTEL_SPANS``, or when unset: whether a tracer provider is configured now (the API's
    proxy provider means none is, and every span would be dropped)."""
    if setting is not None:
        return setting
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def hash_handle(handle: object) -> str | None:
    if not isinstance(handle, str) or not handle:
        return None
    # surrogatepass: a lone surrogate sent as a handle must not cost the request its log line
    return hashlib.sha256(handle.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _uri_subject(uri: str) -> str:
    return uri.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0]


def _subject(ctx: ServerRequestContext[Any, Any]) -> tuple[object, str | None]:
    """(tool name as sent, handle hash) of a request, read from its raw params."""
    params = ctx.params if isinstance(ctx.params, Mapping) else {}
    if ctx.method == "tools/call":
        arguments = params.get("arguments") or {}
        return params.get("name"), hash_handle(
            arguments.get("handle") if isinstance(arguments, dict) else None
        )
    if ctx.method == "resources/read":
        uri = params.get("uri")
        # import://{handle} and its review, import://{handle}/review?...: the same handle's hash
        return None, hash_handle(_uri_subject(uri) if isinstance(uri, str) else None)
    return None, None


def _outcome(result: HandlerResult) -> str:
    # Inside the middleware chain the handler's result is already the wire dict (the SDK
    # serializes it before returning through call_next), so read the wire field names.
    if isinstance(result, InputRequiredResult | CallToolResult):
        result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if not isinstance(result, dict):
        return "ok"
    if result.get("resultType") == "input_required":
        return "input_required"
    if result.get("isError") is True:
        content = result.get("content") or [{}]
        text = content[0].get("text", "") if isinstance(content[0], dict) else ""
        return "error:" + str(text).split(":", 1)[0]
    return "ok"


OnRequest = Callable[[str, str | None, str, float], None]
"""``on_request(method, tool, outcome, seconds)``, called once per request after it is logged."""


class RequestLog:
    """Outermost middleware: times the request and logs how it ended (and tells ``on_request``)."""

    def __init__(self, on_request: OnRequest | None = None) -> None:
        self.on_request = on_request

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:  # a notification
            return await call_next(ctx)
        started = time.perf_counter()
        outcome = "ok"
        try:
            result = await call_next(ctx)
            outcome = _outcome(result)
            return result
        except MCPError as exc:
            outcome = f"jsonrpc_error:{exc.error.code}"
            raise
        except ValidationError:  # the SDK's own check of the request's shape: the client's mistake
            outcome = f"jsonrpc_error:{INVALID_PARAMS}"
            raise
        except anyio.get_cancelled_exc_class():
            outcome = "cancelled"
            raise
        except Exception:
            outcome = "internal_error"
            raise
        finally:
            tool, handle = _subject(ctx)
            log.info(
                json.dumps(
                    {
                        "event": "mcp.request",
                        "request_id": bounded(ctx.request_id),
                        "method": bounded(ctx.method),
                        "tool": bounded(tool),
                        "handle": handle,
                        "outcome": outcome,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                    }
                )
            )
            if self.on_request is not None:
                try:
                    name = tool if isinstance(tool, str) else None
                    self.on_request(ctx.method, name, outcome, time.perf_counter() - started)
                except Exception:  # metrics must never break a request
                    log.exception("on_request hook failed")
