"""PostgreSQL NOTIFY on new events, so every worker hears a change at once instead of on a poll.

Each flush that inserts event rows sends one ``pg_notify`` in the same transaction: PostgreSQL
delivers it only when that transaction commits, and never for one that rolls back. The payload is
the new event ids and nothing else (no record contents, no handles); the event table stays the source
of truth, and a listener re-reads it (see ``adapter.entrypoints.mcp.feed_pg``).

The channel is named after the schema (``search_path``), so deployments or test runs that share one
database in separate schemas do not wake each other.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import Connection, event, text
from sqlalchemy.orm import Session, sessionmaker

from adapter.store.tables import EventRow

__all__ = ["channel_for_schema", "current_channel", "install_event_notify", "notify_events"]

_NOTIFY = text("SELECT pg_notify(:channel, :payload)")
_CHANNELS: dict[str, str] = {}
_MAX_PAYLOAD = 7000  # PostgreSQL refuses payloads of 8000 bytes or more


def channel_for_schema(schema: str) -> str:
    """A safe identifier (hex only), the same for the sender and every listener of one schema."""
    return "adapter_events_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


def current_channel(connection: Connection) -> str:
    key = str(connection.engine.url)
    channel = _CHANNELS.get(key)
    if channel is None:
        schema = connection.execute(text("SELECT current_schema()")).scalar_one()
        channel = _CHANNELS[key] = channel_for_schema(str(schema))
    return channel


def _payloads(ids: list[int]) -> list[str]:
    out: list[str] = []
    chunk = ""
    for event_id in ids:
        part = str(event_id)
        if chunk and len(chunk) + len(part) + 1 > _MAX_PAYLOAD:
            out.append(chunk)
            chunk = ""
        chunk = f"{chunk},{part}" if chunk else part
    if chunk:
        out.append(chunk)
    return out


def notify_events(connection: Connection, ids: list[int]) -> None:
    """Announce the events ``ids`` written in this transaction (delivered only if it commits)."""
    if not ids:
        return
    channel = current_channel(connection)
    for payload in _payloads(sorted(ids)):
        connection.execute(_NOTIFY, {"channel": channel, "payload": payload})


def _notify_new_events(session: Session, _context: Any) -> None:
    ids = [obj.id for obj in session.new if isinstance(obj, EventRow) and obj.id is not None]
    if ids:
        notify_events(session.connection(), ids)


def install_event_notify(factory: sessionmaker[Session]) -> None:
    """Make every session of this factory announce the events it writes (PostgreSQL only)."""
    if not event.contains(factory, "after_flush", _notify_new_events):
        event.listen(factory, "after_flush", _notify_new_events)
