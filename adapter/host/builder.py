"""The request builder's helpers: what goes into a request and how its failure is read.

Kept apart from :mod:`adapter.host.host` so the host reads as the call flow; everything here is a
pure function of its arguments or one SDK request.
"""

from __future__ import annotations

import uuid
from typing import Any, cast

import httpx2
from mcp_types import (
    ListResourcesResult,
    PaginatedRequestParams,
    ReadResourceResult,
    RequestParamsMeta,
    Tool,
)

from adapter.host.connection import Connection
from adapter.host.lifecycle import Call
from adapter.host.policy import ConsentRequest, Risk, ServerRule

__all__ = [
    "all_tools",
    "consent_request",
    "idempotency_key",
    "list_resources_page",
    "read_resource_once",
    "trace_meta",
    "unreachable",
]


def unreachable(exc: BaseException) -> bool:
    """The request never reached the server (refused connection): safe to say nothing happened."""
    chain: BaseException | None = exc
    while chain is not None:
        if isinstance(chain, httpx2.ConnectError | httpx2.ConnectTimeout | ConnectionRefusedError):
            return True
        if isinstance(chain, BaseExceptionGroup):
            return any(unreachable(inner) for inner in chain.exceptions)
        chain = chain.__cause__ or chain.__context__
    return False


async def all_tools(conn: Connection) -> list[Tool]:
    tools: list[Tool] = []
    params: PaginatedRequestParams | None = None
    for _ in range(100):  # bounded: a server that never stops paging is not trusted further
        page = await conn.client.session.list_tools(params=params)
        tools.extend(page.tools)
        if not page.next_cursor:
            break
        params = PaginatedRequestParams(cursor=page.next_cursor)
    return tools


def trace_meta(traceparent: str) -> RequestParamsMeta:
    return cast(RequestParamsMeta, {"traceparent": traceparent})


async def list_resources_page(conn: Connection, cursor: str) -> ListResourcesResult:
    params = PaginatedRequestParams(cursor=cursor) if cursor else None
    return await conn.client.session.list_resources(params=params)


async def read_resource_once(conn: Connection, uri: str) -> ReadResourceResult:
    return await conn.client.session.read_resource(uri)


def idempotency_key(tool: Tool, rule: ServerRule, args: dict[str, Any]) -> str | None:
    """The host makes and keeps the key when the tool takes one and the caller gave none."""
    name = rule.idempotency_argument
    properties = (tool.input_schema or {}).get("properties") or {}
    if name not in properties:
        return None
    if not args.get(name):
        args[name] = f"host-{uuid.uuid4().hex}"
    return str(args[name])


def consent_request(call: Call, risk: Risk, rule: ServerRule, args: dict[str, Any]) -> ConsentRequest:
    shown = rule.consent_parameters.get(call.tool)
    if shown is None:
        shown = tuple(k for k in args if k != rule.idempotency_argument)
    parameters = {k: args[k] for k in shown if k in args}
    return ConsentRequest(call.server, call.principal, call.tool, call.qualified, risk, parameters)
