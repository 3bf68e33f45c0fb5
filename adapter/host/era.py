"""Which protocol era a server speaks, learnt explicitly and re-learnt, never guessed from a failure.

The SDK's ``mode="auto"`` falls back to the handshake era on *any* JSON-RPC error of the first
``server/discover``, including a 500 or a 401 that the transport turned into one, and the host used
to pin that guess for good. Here the evidence decides (the wire journal's HTTP status and error code):

* a ``server/discover`` result naming a modern version: the 2026 era;
* a refusal a handshake-era server gives (a 4xx with a JSON-RPC error such as "Server not
  initialized", ``-32601``, or ``-32022`` naming only handshake versions): the 2025 era, confirmed by
  a successful ``initialize``;
* 401/403: a credential problem, no verdict; 5xx, 408/429, timeouts, resets: a passing problem,
  retried (bounded), then reported; the era stays unknown.

A server may be required to speak one era (``ServerSpec.require_era``): a server of the other era is
refused and reported, never talked to in a silent mixed mode. What was learnt is fresh for the
discover result's ``ttlMs`` (a handshake-era server has no such hint: each connection's handshake
re-checks it); after that, after the server went down, or on an explicit discovery it is learnt again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import mcp_types as types
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from adapter.host.wire import WireRecord

__all__ = ["Era", "Evidence", "Learnt", "classify", "discover_evidence"]

Era = Literal["modern", "legacy"]
LEGACY_REFUSALS = frozenset({-32000, -32600, -32601, -32602})  # what handshake-era servers answer


class Evidence(StrEnum):
    MODERN = "modern"
    LEGACY = "legacy"
    UNAUTHORIZED = "unauthorized"  # 401/403: the principal's credentials, not the server's era
    TRANSIENT = "transient"  # 5xx, 408/429, timeouts, resets: retry, then report; no verdict
    UNREACHABLE = "unreachable"  # nothing reached the server
    INCOMPATIBLE = "incompatible"  # speaks only versions this host does not
    MISROUTED = "misrouted"  # the answer came from another endpoint or identity than configured


@dataclass(frozen=True)
class Learnt:
    """What one detection established about a server."""

    era: Era
    version: str
    discover: types.DiscoverResult | None
    server_info: types.Implementation | None
    instructions: str | None
    fresh_until: float  # time.monotonic(); a handshake-era server re-checks on every connection
    learnt_at: float

    @classmethod
    def modern(cls, result: types.DiscoverResult) -> Learnt:
        now = time.monotonic()
        mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in result.supported_versions]
        raw = (result.meta or {}).get("io.modelcontextprotocol/serverInfo")
        info = None
        if raw is not None:
            try:
                info = types.Implementation.model_validate(raw)
            except ValidationError:
                info = None
        ttl = max(result.ttl_ms or 0, 0) / 1000
        return cls("modern", mutual[-1], result, info, result.instructions, now + ttl, now)

    @classmethod
    def legacy(cls, version: str, info: types.Implementation | None, instructions: str | None) -> Learnt:
        now = time.monotonic()
        return cls("legacy", version, None, info, instructions, float("inf"), now)

    @property
    def fresh(self) -> bool:
        return time.monotonic() < self.fresh_until


def discover_evidence(raw: dict[str, object]) -> tuple[Evidence, types.DiscoverResult | None]:
    """A ``server/discover`` result: modern when it names a version this host speaks."""
    try:
        result = types.DiscoverResult.model_validate(raw)
    except ValidationError:
        return Evidence.LEGACY, None  # not a discover result: no modern evidence
    if any(v in result.supported_versions for v in MODERN_PROTOCOL_VERSIONS):
        return Evidence.MODERN, result
    if any(v in result.supported_versions for v in HANDSHAKE_PROTOCOL_VERSIONS):
        return Evidence.LEGACY, None
    return Evidence.INCOMPATIBLE, None


def classify(exc: BaseException, record: WireRecord | None) -> Evidence:
    """What a failed request says about the server, from the wire journal's record of it."""
    from mcp.shared.exceptions import MCPError

    from adapter.host.errors import CorrelationError, unwrap

    exc = unwrap(exc)
    if record is not None and record.rejected and not record.sent:
        return Evidence.MISROUTED
    if isinstance(exc, CorrelationError):
        return Evidence.MISROUTED
    if record is None or not record.sent:
        return Evidence.UNREACHABLE
    status = record.http_status
    if status in (401, 403):
        return Evidence.UNAUTHORIZED
    if status is not None and (status >= 500 or status in (408, 429)):
        return Evidence.TRANSIENT
    if isinstance(exc, MCPError):
        if exc.code == UNSUPPORTED_PROTOCOL_VERSION:
            supported = _supported(exc.error.data)
            if any(v in HANDSHAKE_PROTOCOL_VERSIONS for v in supported):
                return Evidence.LEGACY
            return Evidence.INCOMPATIBLE
        if record.answered and exc.code in LEGACY_REFUSALS:
            return Evidence.LEGACY
        if status is not None and status in (400, 404, 405) and exc.code in LEGACY_REFUSALS:
            return Evidence.LEGACY
    return Evidence.TRANSIENT


def _supported(data: object) -> list[str]:
    try:
        return types.UnsupportedProtocolVersionErrorData.model_validate(data).supported
    except ValidationError:
        return []
