"""Audit events and trace context.

An audit event names who called what where and what came of it: server, principal and tenant,
qualified tool, the fingerprint of the contract actually used, outcome, call id and trace id. It
never carries tokens, arguments or results, so an audit log can be kept and shared without
becoming a copy of the data.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["AuditEvent", "AuditLog", "TraceContext"]

log = logging.getLogger("adapter.host.audit")


@dataclass(frozen=True)
class AuditEvent:
    at: datetime
    server: str
    principal: str
    tool: str
    fingerprint: str
    outcome: str
    call_id: str
    trace_id: str
    detail: str = ""
    tenant: str = ""

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["at"] = self.at.isoformat()
        return values


class AuditLog:
    """Keeps events in memory and logs each one; ``sink`` forwards them elsewhere too."""

    def __init__(self, sink: Callable[[AuditEvent], None] | None = None) -> None:
        self.events: list[AuditEvent] = []
        self._sink = sink

    def record(self, event: AuditEvent) -> None:
        self.events.append(event)
        log.info("mcp call", extra={"audit": event.as_dict()})
        if self._sink is not None:
            self._sink(event)

    @staticmethod
    def now() -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True)
class TraceContext:
    """W3C trace context; each request gets its own span under the call's trace id."""

    trace_id: str

    @classmethod
    def new(cls) -> TraceContext:
        return cls(secrets.token_hex(16))

    def child(self) -> tuple[str, str]:
        """A new span: (span id, ``traceparent`` value for ``_meta``)."""
        span = secrets.token_hex(8)
        return span, f"00-{self.trace_id}-{span}-01"
