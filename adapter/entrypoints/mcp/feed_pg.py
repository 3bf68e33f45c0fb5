"""The change feed on PostgreSQL: woken by LISTEN/NOTIFY, read from the event table.

The ids of the events every transaction writes are sent on a channel of the schema once it has
committed (see ``adapter.store.notify``). This process listens on a dedicated psycopg 3
connection (autocommit, outside the pool); a notification only wakes the feed, which then reads the
event table as the in-process feed does (``ChangeFollower``), so the table stays the source of truth:
a notification that is lost (the connection dropped, the process was busy) costs nothing but time,
because the feed also reads every ``catch_up_seconds`` and right after it (re)connects. Many
notifications arriving together cause one read. Updates still go only to streams that subscribed to
an import their principal owns (``McpGateway.listen`` filters at subscription time).

While nobody in this process listens (``listening()`` is false) a notification reads nothing: the
catch-up read, at most once every ``catch_up_seconds``, moves past what is new. Under load every
worker heard every other's notifications and read the event table for nobody, about 4.7 reads per
import with two workers (``bench/load.py``), most of the second worker's extra statements. A stream
that arrives meanwhile hears, beside what is new, the changes of the last catch-up interval at most:
a ``resources/updated`` for a change it did not see costs it one re-read, never a lost update.

While someone here listens, the feed holds the channel's audience lock (``AudiencePresence``,
``store/notify.py``); announcers send nothing while nobody anywhere holds it, so a deployment whose
hosts do not listen pays for no notifications at all. The gateway wakes the feed when a first
listener arrives (``arrivals``: ``McpGateway.watch_audience``; without it the feed looks every
``AUDIENCE_POLL_SECONDS``), the feed takes the lock and reads at once, and taking it tells every
worker's announcer (the ``audience`` payload). A change another worker committed in between, before
its announcer heard, is told by one more read ``SETTLE_SECONDS`` later. With ``arrivals`` the feed
sleeps until a notification, an arrival or its catch-up read: an idle worker woke ten times a second
to look at a flag, about a sixth of its idle CPU (``bench/RESULTS.md``).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable

import anyio
import psycopg
from anyio.streams.memory import MemoryObjectSendStream
from psycopg import sql

from adapter.entrypoints.mcp.feed import Arrivals, Listening, Publish
from adapter.entrypoints.mcp.tools import run_in_thread
from adapter.services import ImportService
from adapter.store.notify import AUDIENCE_PAYLOAD, AudiencePresence, channel_of, libpq_dsn

__all__ = ["run_pg_event_feed"]

log = logging.getLogger("adapter.feed")

RECONNECT_SECONDS = 1.0
AUDIENCE_POLL_SECONDS = 0.1
"""How often a feed with nobody to tell and no ``arrivals`` looks whether someone came (a flag)."""
SETTLE_SECONDS = 0.2
"""After taking the audience lock, the next read this much later (see the module doc)."""


async def run_pg_event_feed(
    service: ImportService,
    publish: Publish,
    *,
    catch_up_seconds: float = 1.0,
    listening: Listening | None = None,
    arrivals: Arrivals | None = None,
) -> None:
    """Publish the changed imports whenever notified or caught up, forever (cancel to stop)."""
    follower = await run_in_thread(service.follow_changes)
    wake_send, wake_receive = anyio.create_memory_object_stream[None](1)
    store = service.ctx.store
    dsn = libpq_dsn(store.engine.url)
    presence = AudiencePresence(dsn, check_seconds=catch_up_seconds)
    if arrivals is not None:
        arrivals(lambda: _wake(wake_send))  # a first listener: take the lock now

    async def read_and_publish() -> None:
        try:
            await publish(await run_in_thread(follower.poll_changes, listening))
        except Exception:  # a database hiccup must not end the feed
            log.warning("event feed read failed; retrying", exc_info=True)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_listen_forever, dsn, wake_send, store.expect_audience)
        try:
            async with wake_receive:
                last_read, settle_at = -math.inf, math.inf
                told_of_arrivals = arrivals is not None  # a first listener wakes the feed itself
                while True:
                    wait = catch_up_seconds if presence.held or told_of_arrivals else AUDIENCE_POLL_SECONDS
                    with anyio.move_on_after(min(wait, max(0.0, settle_at - anyio.current_time()))):
                        await wake_receive.receive()
                    now, quiet = anyio.current_time(), listening is not None and not listening()
                    if await presence.keep(not quiet):
                        store.expect_audience()  # this worker's own commits: at once
                        settle_at = now + SETTLE_SECONDS
                    elif now >= settle_at:
                        settle_at = math.inf  # this pass is the settling read
                    if quiet and now - last_read < catch_up_seconds:
                        continue  # nobody here to tell: the next catch-up read moves past it
                    last_read = now
                    await read_and_publish()
        finally:
            with anyio.CancelScope(shield=True):
                await presence.close()


def _wake(wake: MemoryObjectSendStream[None]) -> None:
    with contextlib.suppress(anyio.WouldBlock):  # a read is already due: it will see this too
        wake.send_nowait(None)


async def _listen_forever(
    dsn: str, wake: MemoryObjectSendStream[None], heard_audience: Callable[[], None]
) -> None:
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                channel = await channel_of(conn)
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                _wake(wake)  # catch up on what happened while nobody listened
                async for notify in conn.notifies():
                    if notify.payload == AUDIENCE_PAYLOAD:
                        heard_audience()  # a worker took the audience lock: announce to it
                    else:
                        _wake(wake)
        except Exception:
            log.warning("event notifications lost their connection; reconnecting", exc_info=True)
        await anyio.sleep(RECONNECT_SECONDS)
