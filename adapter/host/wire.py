"""The wire guard: correlates every response with its request, server and protocol version.

The SDK's HTTP transport pairs a response with the POST that carried it and overwrites the id it
finds there, so a response carrying another request's id would be taken as ours. This httpx2
transport sits below the SDK and checks every JSON-RPC response before the SDK sees it:

* its ``id`` is the id of the request on that POST;
* the protocol version it names (``MCP-Protocol-Version`` header, ``_meta`` stamp) is the declared one,
  and a 2026-era request gets a 2026-era result (``resultType``);
* the server identity it names (the ``serverInfo`` stamp) is the one this connection is bound to;
* it came from the configured URL: a request the SDK would follow to another path of the same origin
  (a same-origin redirect: a gateway routing ``/us`` to ``/eu``) is refused before it is sent, since
  the server's identity is its configured id and URL, not the name it declares.

A failed check raises :class:`CorrelationError` in place of the response and is noted in the
:class:`WireJournal`, which also records, per request, whether it left the host and whether an answer
came back: the evidence that separates ``failed`` (never sent) from ``outcome_unknown`` (sent, no answer).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from adapter.host.errors import CorrelationError

__all__ = ["WireGuard", "WireJournal", "WireRecord", "span_of"]

PROTOCOL_META = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
MODERN_VERSIONS = frozenset(MODERN_PROTOCOL_VERSIONS)


def span_of(traceparent: str | None) -> str | None:
    """The span id of a W3C ``traceparent`` (the host's key for one request), or None."""
    if not traceparent or traceparent.count("-") != 3:
        return None
    return traceparent.split("-")[2]


@dataclass
class WireRecord:
    """What happened to one request on the wire. Holds ids and verdicts only, never contents.

    ``http_status`` and ``error_code`` are the evidence the era detection and the failure report read:
    a 401 is a credential problem, a 5xx a passing one, a 400 with a JSON-RPC error to
    ``server/discover`` a server of the handshake era.
    """

    rpc_id: str | int | None
    method: str
    declared_version: str | None
    declared_capabilities: dict[str, Any] | None
    sent: bool = False
    in_flight: bool = False  # handed to the network, no verdict yet: it may already have arrived
    answered: bool = False
    lost: bool = False
    rejected: str | None = None
    http_status: int | None = None
    error_code: int | None = None
    abandoned: bool = False  # the host closed the request's stream before an answer (cancellation)


@dataclass
class WireJournal:
    """Records per span id (the host's requests) and the most recent ones by method (the SDK's own)."""

    by_span: dict[str, WireRecord] = field(default_factory=dict)
    recent: list[WireRecord] = field(default_factory=list)
    expected_server: str | None = None
    expected_url: str | None = None
    cancelled: list[str | int] = field(default_factory=list)  # ids named by notifications/cancelled sent
    strays: int = 0  # responses for an id this host never sent (stdio: dropped)

    def note(self, span: str | None, record: WireRecord) -> None:
        if span is not None:
            self.by_span[span] = record
        self.recent.append(record)
        del self.recent[:-50]


class WireGuard(httpx2.AsyncBaseTransport):
    """Wraps the real transport; checks and journals every MCP POST (see the module docstring)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, journal: WireJournal) -> None:
        self._inner = inner
        self.journal = journal

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        expected = self.journal.expected_url
        if expected is not None and not _same_endpoint(str(request.url), expected):
            why = f"request routed to {request.url}, not the configured {expected}"
            self.journal.note(None, WireRecord(None, "(redirected)", None, None, rejected=why))
            raise CorrelationError(why)  # never sent
        message = _json_body(request)
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            request_id = (message.get("params") or {}).get("requestId")
            if request_id is not None:
                self.journal.cancelled.append(request_id)
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            return await self._inner.handle_async_request(request)
        params = message.get("params") or {}
        meta = params.get("_meta") or {}
        record = WireRecord(
            rpc_id=message["id"],
            method=message["method"],
            declared_version=request.headers.get("mcp-protocol-version") or meta.get(PROTOCOL_META),
            declared_capabilities=meta.get(CAPABILITIES_META),
        )
        self.journal.note(span_of(meta.get("traceparent")), record)
        record.in_flight = True
        try:
            response = await self._inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            record.in_flight = False
            raise  # never reached the server: record.sent stays False
        except BaseException:
            record.sent = record.lost = True
            raise
        record.sent = True
        record.http_status = response.status_code
        answered_version = response.headers.get("mcp-protocol-version")
        if answered_version and record.declared_version and answered_version != record.declared_version:
            record.rejected = f"response for protocol version {answered_version}"
            await response.aclose()
            raise CorrelationError(record.rejected)
        sse = response.headers.get("content-type", "").startswith("text/event-stream")
        checked = _CheckedStream(response.stream, record, self.journal, sse=sse)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=checked,
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _same_endpoint(url: str, expected: str) -> bool:
    a, b = httpx2.URL(url), httpx2.URL(expected)
    return (a.scheme, a.host, a.port, a.path.rstrip("/")) == (b.scheme, b.host, b.port, b.path.rstrip("/"))


def _json_body(request: httpx2.Request) -> Any:
    if request.method != "POST":
        return None
    try:
        return json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None


class _CheckedStream(httpx2.AsyncByteStream):
    """Passes bytes through only after the JSON-RPC messages in them passed the checks."""

    def __init__(self, inner: Any, record: WireRecord, journal: WireJournal, *, sse: bool) -> None:
        self._inner = inner
        self._record = record
        self._journal = journal
        self._sse = sse

    async def __aiter__(self) -> AsyncIterator[bytes]:
        buffer = b""
        try:
            async for chunk in self._inner:
                buffer += chunk
                if not self._sse:
                    continue
                while b"\n\n" in buffer.replace(b"\r\n", b"\n"):
                    normalized = buffer.replace(b"\r\n", b"\n")
                    event, _, rest = normalized.partition(b"\n\n")
                    self._check_event(event)
                    buffer = rest
                    yield event + b"\n\n"
        except CorrelationError:
            raise
        except Exception:
            self._record.lost = True
            raise
        if buffer:
            if self._sse:
                self._check_event(buffer)
            else:
                self._check(buffer)
            yield buffer

    def _check_event(self, event: bytes) -> None:
        data = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
        if data:
            self._check(b"\n".join(data))

    def _check(self, payload: bytes) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return  # not JSON-RPC (a ping comment, a plain HTTP error body): the SDK reports it
        if not isinstance(message, dict) or ("result" not in message and "error" not in message):
            return  # a notification or a server request inside the stream
        verdict = _verdict(message, self._record, self._journal.expected_server)
        if verdict is not None:
            self._record.rejected = verdict
            raise CorrelationError(verdict)
        error = message.get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            self._record.error_code = error["code"]
        self._record.answered = True

    async def aclose(self) -> None:
        if not self._record.answered and self._record.rejected is None:
            self._record.abandoned = True
        await self._inner.aclose()


def _verdict(message: dict[str, Any], record: WireRecord, expected_server: str | None) -> str | None:
    """Why this response is not the answer to ``record``, or None when it is."""
    if message.get("id") is not None and message.get("id") != record.rpc_id:
        return f"response for request id {message.get('id')!r}, expected {record.rpc_id!r}"
    result = message.get("result")
    if not isinstance(result, dict):
        return None  # an error response: nothing more to check
    meta = result.get("_meta") or {}
    version = meta.get(PROTOCOL_META) or result.get("protocolVersion")
    if record.method != "initialize" and version and version != record.declared_version:
        return f"response for protocol version {version}"
    if record.declared_version in MODERN_VERSIONS and "resultType" not in result:
        return "response of another protocol era (no resultType)"
    info = meta.get(SERVER_INFO_META) or result.get("serverInfo")
    name = info.get("name") if isinstance(info, dict) else None
    if expected_server and name and name != expected_server:
        return f"response from server {name!r}, expected {expected_server!r}"
    return None
