"""PostgreSQL NOTIFY on new events, so every worker hears a change at once instead of on a poll.

The event ids a transaction writes are remembered on its session and announced **after it
commits** (never for one that rolls back), by one :class:`EventAnnouncer` per store: a thread with
its own autocommit connection that sends one ``pg_notify`` for everything committed since its last
one. The payload is the new event ids and nothing else (no record contents, no handles); the event
table stays the source of truth, and a listener re-reads it (see ``adapter.entrypoints.mcp.feed_pg``).

Why not ``pg_notify`` inside the writing transaction: PostgreSQL serialises the commits of all
transactions that notify on one database-wide lock, held across each one's WAL flush. Under load
(``bench/load.py``, 32 clients) a committing transaction was queued on that lock in every sample.
A notification lost between the commit and the announcement (the process dies) costs a listener
at most its catch-up interval: the feed also reads on a timer and after every reconnect.

The announcer waits ``_GATHER_SECONDS`` (10 ms) after the first id of a burst, and at least
``_SPACING_SECONDS`` (50 ms) after its previous notification, then sends everything committed
meanwhile in one ``pg_notify``: at most 20 a second per worker, however busy. Every notification
costs more than its round trip: PostgreSQL wakes every listening backend, each worker's feed wakes
for it, and with the spacing at 10 ms a worker sent about one per import and heard those of every
other worker. Under load (``bench/load.py --clients 32``) the 50 ms spacing cut a worker's CPU per
import by 5-15%, PostgreSQL's by about 10%, and two workers' extra cost over one from 13-20% to
1-3% (``bench/RESULTS.md``). A listener hears a change at most about 50 ms later (the feed's
target is 100 ms at p99, ``bench/feed_latency.py``).

The channel is named after the schema (``search_path``), so deployments or test runs that share one
database in separate schemas do not wake each other.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any

import psycopg
from sqlalchemy import Engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker

from adapter.store.tables import EventRow

__all__ = ["EventAnnouncer", "channel_for_schema", "install_event_notify", "libpq_dsn", "remember_events"]

log = logging.getLogger("adapter.store.notify")

_MAX_PAYLOAD = 7000  # PostgreSQL refuses payloads of 8000 bytes or more
_PENDING = "adapter_new_event_ids"  # session.info key: ids written by the open transaction
_NOTIFY = "SELECT pg_notify(%s, payload) FROM unnest(%s::text[]) AS payload"
_RETRY_SECONDS = 0.5
_GATHER_SECONDS = 0.01
_SPACING_SECONDS = 0.05


def channel_for_schema(schema: str) -> str:
    """A safe identifier (hex only), the same for the sender and every listener of one schema."""
    return "adapter_events_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


def libpq_dsn(engine_url: str | URL) -> str:
    """The SQLAlchemy URL as a libpq connection string (keeps ``options=-csearch_path=...``)."""
    return make_url(engine_url).set(drivername="postgresql").render_as_string(hide_password=False)


def _payloads(ids: Iterable[int]) -> list[str]:
    out: list[str] = []
    chunk = ""
    for event_id in sorted(ids):
        part = str(event_id)
        if chunk and len(chunk) + len(part) + 1 > _MAX_PAYLOAD:
            out.append(chunk)
            chunk = ""
        chunk = f"{chunk},{part}" if chunk else part
    if chunk:
        out.append(chunk)
    return out


class EventAnnouncer:
    """Sends the notifications of committed events from one thread, coalescing bursts.

    ``announce`` never blocks and never fails: a transaction that committed is done, whatever
    happens to its announcement (a listener catches up on its timer).
    """

    def __init__(
        self, dsn: str, gather_seconds: float = _GATHER_SECONDS, spacing_seconds: float = _SPACING_SECONDS
    ) -> None:
        self._dsn = dsn
        self._gather_seconds = gather_seconds
        self._spacing_seconds = spacing_seconds
        self._queue: queue.SimpleQueue[list[int] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._connection: psycopg.Connection[Any] | None = None
        self._channel = ""
        self._last_sent = -math.inf

    def announce(self, ids: list[int]) -> None:
        if not ids:
            return
        self._queue.put(ids)
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="event-announcer", daemon=True)
                    self._thread.start()

    def close(self) -> None:
        """Send what is queued, then stop the thread and close its connection."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            batch, stop = ([] if first is None else first), first is None
            if not stop:  # let the burst's other commits join this one
                spaced = self._last_sent + self._spacing_seconds - time.monotonic()
                time.sleep(max(self._gather_seconds, spaced))
            while not stop:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                stop = more is None
                batch += more or []
            if batch:
                self._send(batch)
                self._last_sent = time.monotonic()
            if stop:
                self._disconnect()
                return

    def _send(self, ids: list[int]) -> None:
        try:
            connection = self._connect()
            connection.execute(_NOTIFY, (self._channel, _payloads(ids)))
        except psycopg.Error as exc:  # listeners catch up on their timer; try afresh next time
            log.warning("event notification not sent (%s); listeners will catch up", type(exc).__name__)
            self._disconnect()

    def _connect(self) -> psycopg.Connection[Any]:
        if self._connection is None or self._connection.closed:
            self._connection = psycopg.connect(self._dsn, autocommit=True)
            row = self._connection.execute("SELECT current_schema()").fetchone()
            self._channel = channel_for_schema(str(row[0] if row else "public"))
        return self._connection

    def _disconnect(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(psycopg.Error):
                self._connection.close()
            self._connection = None


def remember_events(session: Session, ids: Iterable[int]) -> None:
    """Note events written in the session's transaction, to be announced when it commits."""
    session.info.setdefault(_PENDING, []).extend(ids)


def _remember_flushed_events(session: Session, _context: Any) -> None:
    remember_events(
        session, (obj.id for obj in session.new if isinstance(obj, EventRow) and obj.id is not None)
    )


def _forget_events(session: Session, transaction: SessionTransaction) -> None:
    """A transaction that ended without its commit (rolled back, or closed) announces nothing."""
    if transaction.parent is None:
        session.info.pop(_PENDING, None)


def install_event_notify(factory: sessionmaker[Session], engine: Engine) -> EventAnnouncer:
    """Make every session of this factory announce the events it commits (PostgreSQL only)."""
    announcer = EventAnnouncer(libpq_dsn(engine.url))

    def announce_committed(session: Session) -> None:
        announcer.announce(session.info.pop(_PENDING, []))

    event.listen(factory, "after_flush", _remember_flushed_events)
    event.listen(factory, "after_commit", announce_committed)
    event.listen(factory, "after_transaction_end", _forget_events)  # after "after_commit"
    return announcer
