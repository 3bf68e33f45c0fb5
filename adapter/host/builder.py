"""The request builder's helpers: what goes into a request and how its answer is read.

Kept apart from :mod:`adapter.host.host` so the host reads as the call flow; everything here is a
pure function of its arguments or one SDK request.

A tool call goes out through the session's public ``send_request`` with a result model that accepts
any result shape, not through ``call_tool``: after a result, ``call_tool`` lists the tools again to
check the output schema, and when that extra ``tools/list`` is lost a committed effect surfaced as an
exception (the host reported ``failed``). The host checks the output schema itself, against the
contract it approved, once the answer is in hand.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, cast

import httpx2
import jsonschema_rs
import mcp_types as types
from mcp_types import (
    CallToolResult,
    InputRequiredResult,
    ListResourcesResult,
    PaginatedRequestParams,
    ReadResourceResult,
    RequestParamsMeta,
    Tool,
)
from pydantic import BaseModel, ConfigDict, ValidationError

from adapter.host.connection import Connection
from adapter.host.consent import ConsentRequest
from adapter.host.lifecycle import Call
from adapter.host.policy import Risk, ServerRule

__all__ = [
    "ReadResult",
    "all_tools",
    "consent_request",
    "effect_of",
    "idempotency_key",
    "list_resources_page",
    "read_call_result",
    "read_resource_once",
    "send_call",
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


class _AnyResult(BaseModel):
    """Whatever the server answered, kept whole; the host decides what it is."""

    model_config = ConfigDict(extra="allow")


async def send_call(
    conn: Connection,
    name: str,
    arguments: dict[str, Any],
    *,
    progress: Any,
    responses: dict[str, types.InputResponse] | None,
    state: str | None,
    meta: RequestParamsMeta,
) -> dict[str, Any]:
    """One ``tools/call`` request; the raw result (no re-listing, no exception for an odd shape)."""
    request = types.CallToolRequest(
        params=types.CallToolRequestParams(
            name=name, arguments=arguments, input_responses=responses, request_state=state, _meta=meta
        )
    )
    result = await conn.client.session.send_request(request, _AnyResult, progress_callback=progress)
    return result.model_dump(mode="json", by_alias=True)


@dataclass(frozen=True)
class ReadResult:
    """A raw answer read: exactly one of ``result``, ``questions``, ``other`` (a result type the host
    does not know, such as a task) is set; ``problem`` says why a result cannot be used."""

    result: CallToolResult | None = None
    questions: InputRequiredResult | None = None
    other: dict[str, Any] | None = None
    problem: str | None = None


def read_call_result(raw: dict[str, Any], tool: Tool) -> ReadResult:
    kind = raw.get("resultType", "complete")
    if kind == "input_required":
        try:
            return ReadResult(questions=InputRequiredResult.model_validate(raw))
        except ValidationError:
            return ReadResult(other=raw, problem="an input request the host could not read")
    if kind != "complete":
        return ReadResult(other=raw, problem=f"a result of type {kind!r} the host does not follow")
    try:
        result = CallToolResult.model_validate(raw)
    except ValidationError as exc:
        return ReadResult(
            other=raw, problem=f"a result that is not a tool result ({exc.error_count()} errors)"
        )
    if result.is_error or tool.output_schema is None:
        return ReadResult(result=result)
    if result.structured_content is None:
        return ReadResult(result=result, problem="no structured content, though the contract declares one")
    try:
        valid = jsonschema_rs.validator_for(tool.output_schema).is_valid(result.structured_content)
    except (ValueError, jsonschema_rs.ValidationError):
        return ReadResult(result=result, problem="the approved output schema cannot be checked")
    if not valid:
        return ReadResult(result=result, problem="structured content that breaks the approved output schema")
    return ReadResult(result=result)


def idempotency_key(tool: Tool, rule: ServerRule, args: dict[str, Any]) -> str | None:
    """The host makes and keeps the key when the tool takes one and the caller gave none."""
    name = rule.idempotency_argument
    properties = (tool.input_schema or {}).get("properties") or {}
    if name not in properties:
        return None
    if not args.get(name):
        args[name] = f"host-{uuid.uuid4().hex}"
    return str(args[name])


def effect_of(tool: Tool, risk: Risk) -> str:
    """What the action does, in a line a person reads: the tool's title or first sentence, and its risk."""
    text = tool.title or (tool.description or tool.name).split("\n", 1)[0].split(". ", 1)[0]
    hints = tool.annotations
    notes = []
    if risk is Risk.DESTRUCTIVE:
        notes.append("cannot simply be undone")
    if hints is not None and hints.idempotent_hint is True:
        notes.append("the server says repeating it changes nothing more")
    if hints is not None and hints.open_world_hint is True:
        notes.append("reaches outside the server")
    return f"{text.rstrip('.')}" + (f" ({'; '.join(notes)})" if notes else "")


def consent_request(
    call: Call, tool: Tool, risk: Risk, rule: ServerRule, args: dict[str, Any]
) -> ConsentRequest:
    shown = rule.consent_parameters.get(call.tool)
    if shown is None:
        shown = tuple(k for k in args if k != rule.idempotency_argument)
    parameters = {k: args[k] for k in shown if k in args}
    return ConsentRequest(
        call.server,
        call.principal,
        call.tool,
        call.qualified,
        risk,
        parameters,
        effect=effect_of(tool, risk),
        fingerprint=call.fingerprint,
        call_id=call.call_id,
        trace_id=call.trace_id,
        tenant=call.tenant,
    )
