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

**Only while someone listens.** A worker with someone to tell (a listen stream, a 2025-era session)
holds the channel's *audience lock*, a shared advisory lock, on a connection of its own
(:class:`AudiencePresence`, held by the feed, ``feed_pg.py``); PostgreSQL releases it with the
connection, so a worker that dies stops counting. An announcer asks at most every
``_AUDIENCE_SECONDS`` (0.5 s) whether anyone holds it (one ``pg_try_advisory_xact_lock``, which fails
while any shared holder exists) and, while nobody does, sends nothing and does not even wake its
thread. Every notification otherwise cost each worker its announcer's thread and round trip and woke
every worker's feed: with four workers and nobody listening that was about a third of the server's
CPU per import (``bench/load.py --embedded-postgres``, PostgreSQL on a CPU of its own, notifications
off against on). A worker whose first listener arrives takes the lock and, in the same statement,
sends ``AUDIENCE_PAYLOAD``: every worker's feed hears it and tells its announcer
(:meth:`EventAnnouncer.expect_audience`), so they announce from then on without waiting for their
next check. A change committed in that round trip is told by the feed's next read.

The channel is named after the schema (``search_path``), so deployments or test runs that share one
database in separate schemas do not wake each other; so is the audience lock (:func:`audience_key`).
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

__all__ = [
    "AUDIENCE_PAYLOAD",
    "AudiencePresence",
    "EventAnnouncer",
    "audience_key",
    "channel_for_schema",
    "channel_of",
    "install_event_notify",
    "libpq_dsn",
    "remember_events",
]

log = logging.getLogger("adapter.store.notify")

_MAX_PAYLOAD = 7000  # PostgreSQL refuses payloads of 8000 bytes or more
_PENDING = "adapter_new_event_ids"  # session.info key: ids written by the open transaction
_NOTIFY = "SELECT pg_notify(%s, payload) FROM unnest(%s::text[]) AS payload"
_RETRY_SECONDS = 0.5
_GATHER_SECONDS = 0.01
_SPACING_SECONDS = 0.05
_AUDIENCE_SECONDS = 0.5
_NOBODY_LISTENS = "SELECT pg_try_advisory_xact_lock(%s)"  # free (true) while no shared holder exists
_TAKE_AUDIENCE = "SELECT pg_advisory_lock_shared(%s), pg_notify(%s, %s)"
_LEAVE_AUDIENCE = "SELECT pg_advisory_unlock_shared(%s)"
AUDIENCE_PAYLOAD = "audience"
"""Sent on the channel when a worker takes the audience lock (never an event id)."""


def channel_for_schema(schema: str) -> str:
    """A safe identifier (hex only), the same for the sender and every listener of one schema."""
    return "adapter_events_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


async def channel_of(connection: psycopg.AsyncConnection[Any]) -> str:
    """The channel of the schema ``connection`` works in (its ``search_path``)."""
    cursor = await connection.execute("SELECT current_schema()")
    row = await cursor.fetchone()
    return channel_for_schema(str(row[0] if row else "public"))


def audience_key(channel: str) -> int:
    """The advisory lock (a bigint) whose shared holders are the workers listening on ``channel``."""
    return int.from_bytes(hashlib.sha256(channel.encode()).digest()[:8], "big", signed=True)


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
        self,
        dsn: str,
        gather_seconds: float = _GATHER_SECONDS,
        spacing_seconds: float = _SPACING_SECONDS,
        audience_seconds: float = _AUDIENCE_SECONDS,
    ) -> None:
        self._dsn = dsn
        self._gather_seconds = gather_seconds
        self._spacing_seconds = spacing_seconds
        self._audience_seconds = audience_seconds
        self._audience = True  # until the first check: a notification too many costs only time
        self._audience_checked = -math.inf
        self._queue: queue.SimpleQueue[list[int] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._connection: psycopg.Connection[Any] | None = None
        self._channel = ""
        self._last_sent = -math.inf

    def announce(self, ids: list[int]) -> None:
        if not ids or self._nobody_listens():
            return
        self._queue.put(ids)
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="event-announcer", daemon=True)
                    self._thread.start()

    def expect_audience(self) -> None:
        """This process has someone to tell now: announce from here on, without waiting for the next
        check (which would find the audience lock this process just took)."""
        self._audience, self._audience_checked = True, time.monotonic()

    def _nobody_listens(self) -> bool:
        """Nobody held the audience lock at a check recent enough to trust (no round trip)."""
        return not self._audience and time.monotonic() - self._audience_checked < self._audience_seconds

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
            if time.monotonic() - self._audience_checked >= self._audience_seconds:
                row = connection.execute(_NOBODY_LISTENS, (audience_key(self._channel),)).fetchone()
                self._audience, self._audience_checked = not (row and row[0]), time.monotonic()
            if self._audience:
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


class AudiencePresence:
    """The audience lock of this process: held while :meth:`keep` is told that someone here listens,
    on a connection of its own (opened the first time, then kept for the process's life).

    Taking the lock also sends ``AUDIENCE_PAYLOAD`` on the channel, in the same statement: every
    worker's feed hears it and tells its announcer (:meth:`EventAnnouncer.expect_audience`), so
    they start announcing within a round trip instead of at their next check. Async, for the feed on
    the server's event loop (``feed_pg.py``). A connection that failed is dropped and opened afresh
    at a later :meth:`keep` (not sooner than ``_RETRY_SECONDS``); while held, :meth:`keep` asks it a
    trivial question at most every ``check_seconds``, so a lock the server dropped with a lost
    connection does not go unseen.
    """

    def __init__(self, dsn: str, check_seconds: float = 1.0) -> None:
        self._dsn = dsn
        self._check_seconds = check_seconds
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self._channel = ""
        self._held = False
        self._checked = -math.inf
        self._retry_at = -math.inf

    @property
    def held(self) -> bool:
        return self._held

    async def keep(self, audience: bool) -> bool:
        """Hold the lock while ``audience``, release it otherwise; True when it was just taken."""
        try:
            if audience == self._held:
                if audience and time.monotonic() - self._checked >= self._check_seconds:
                    await (await self._connected()).execute("SELECT 1")
                    self._checked = time.monotonic()
                return False
            if time.monotonic() < self._retry_at:
                return False
            connection = await self._connected()
            key = audience_key(self._channel)
            if audience:
                await connection.execute(_TAKE_AUDIENCE, (key, self._channel, AUDIENCE_PAYLOAD))
            else:
                await connection.execute(_LEAVE_AUDIENCE, (key,))
            self._held, self._checked = audience, time.monotonic()
            return audience
        except psycopg.Error as exc:  # announcers may then send nothing: the feed's catch-up reads cover it
            log.warning("audience lock lost (%s); taking it again", type(exc).__name__)
            await self.close()
            self._retry_at = time.monotonic() + _RETRY_SECONDS
            return False

    async def _connected(self) -> psycopg.AsyncConnection[Any]:
        if self._connection is None:
            connection = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            self._connection = connection
            self._channel = await channel_of(connection)
        return self._connection

    async def close(self) -> None:
        """Release the lock with the connection (a worker that stops, or one that failed)."""
        connection, self._connection, self._held = self._connection, None, False
        if connection is not None:
            with contextlib.suppress(psycopg.Error):
                await connection.close()


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
