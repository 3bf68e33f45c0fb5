"""Change notifications only while someone listens (``store/notify.py``, the audience lock), across
two worker processes on one PostgreSQL schema.

With nobody listening anywhere, the workers send no notification at all: each one cost every
worker a wake-up and its announcer a round trip, most of what a worker added to the CPU of an
import with four of them (``bench/load.py --embedded-postgres``). A first listen stream on worker A
takes the lock and tells every worker; the next change on worker B reaches it by notification.
The catch-up read is set to 30 s here, so an update that arrives within seconds came by NOTIFY.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import psycopg
import pytest
from psycopg import sql

from adapter.store.notify import AUDIENCE_PAYLOAD, channel_for_schema, libpq_dsn

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.postgres]

CATCH_UP_SECONDS = 30


@pytest.fixture(scope="module")
def cluster_settings() -> dict[str, str]:
    """Two workers whose feeds read the event table on their timer only every 30 s."""
    return {"ADAPTER_EVENT_CATCH_UP_SECONDS": str(CATCH_UP_SECONDS)}


def _raw_listener(cluster: Any) -> psycopg.Connection[Any]:
    """A connection that hears the schema's channel without taking the audience lock."""
    connection = psycopg.connect(libpq_dsn(cluster.database_url), autocommit=True)
    row = connection.execute("SELECT current_schema()").fetchone()
    assert row is not None
    connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel_for_schema(str(row[0])))))
    return connection


def _payloads(listener: psycopg.Connection[Any], seconds: float) -> list[str]:
    return [note.payload for note in listener.notifies(timeout=seconds)]


async def _begin(cluster: Any, http: httpx.AsyncClient) -> str:
    begun = await cluster.b.raw_call(http, "begin_import", {"target": "customers"})
    return str(begun["result"]["structuredContent"]["handle"])


async def test_nothing_is_announced_while_nobody_listens_and_a_first_listener_is_told_by_notification(
    cluster: Any,
) -> None:
    listener = _raw_listener(cluster)
    async with httpx.AsyncClient() as http:  # stateless calls: no session, nobody to tell
        for _ in range(3):
            handle = await _begin(cluster, http)
            await cluster.b.raw_call(http, "abort_import", {"handle": handle})
        await anyio.sleep(1.0)  # past the announcers' check of the audience lock
        handle = await _begin(cluster, http)
    assert await anyio.to_thread.run_sync(_payloads, listener, 1.5) == []

    uri = f"import://{handle}"
    async with (
        cluster.a.client() as on_a,
        cluster.b.client() as on_b,
        on_a.listen(resource_subscriptions=[uri]) as subscription,
    ):
        aborted = cluster.structured(await on_b.call_tool("abort_import", {"handle": handle}))
        assert aborted["status"] == "aborted"
        with anyio.fail_after(5):  # not the 30 s catch-up: a notification woke worker A
            update = await subscription.__anext__()
        assert update.uri == uri
    heard = await anyio.to_thread.run_sync(_payloads, listener, 0.5)
    assert heard[0] == AUDIENCE_PAYLOAD  # worker A took the lock and told every worker
    assert any(payload != AUDIENCE_PAYLOAD for payload in heard[1:])  # then B announced its change
    listener.close()
