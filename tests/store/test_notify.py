"""Event notifications on PostgreSQL (``adapter/store/notify.py``): sent after the writing
transaction commits, carrying its event ids only, never for a transaction that rolls back, and
only while someone holds the audience lock (a worker with someone to tell)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from psycopg import sql

from adapter.store import Store
from adapter.store.notify import (
    AUDIENCE_PAYLOAD,
    AudiencePresence,
    EventAnnouncer,
    audience_key,
    channel_for_schema,
    libpq_dsn,
)
from tests.support.constants import POSTGRES

pytestmark = pytest.mark.parametrize("db_url", [POSTGRES], indirect=True)


def _channel(connection: psycopg.Connection[Any]) -> str:
    row = connection.execute("SELECT current_schema()").fetchone()
    assert row is not None
    return channel_for_schema(str(row[0]))


def _listener(store: Store, *, audience: bool = True) -> psycopg.Connection[Any]:
    """A connection that listens on the store's channel and, as a worker with someone to tell does,
    holds the audience lock (``audience=False``: listens without it)."""
    connection = psycopg.connect(libpq_dsn(store.engine.url), autocommit=True)
    connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(_channel(connection))))
    if audience:
        _hold_audience(connection)
    return connection


def _hold_audience(connection: psycopg.Connection[Any]) -> None:
    connection.execute("SELECT pg_advisory_lock_shared(%s)", (audience_key(_channel(connection)),))


def _audience_held(store: Store) -> bool:
    """Whether anyone holds the store's audience lock, asked as an announcer asks."""
    with psycopg.connect(libpq_dsn(store.engine.url), autocommit=True) as connection:
        row = connection.execute(
            "SELECT pg_try_advisory_xact_lock(%s)", (audience_key(_channel(connection)),)
        )
        return not row.fetchone()[0]  # type: ignore[index]


def _received(listener: psycopg.Connection[Any], seconds: float) -> list[int]:
    ids: list[int] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        for note in listener.notifies(timeout=left, stop_after=1):
            ids += [int(part) for part in note.payload.split(",")]
        if ids:
            break
    return ids


def _record_event(store: Store, *, commit: bool) -> int:
    with store.unit_of_work() as uow:
        uow.events.record("import.begun", import_id="x", operation_id=None, state="open", detail=None)
        uow.flush()
        [event_id] = [e.id for e in uow.events.after(0, 1000)][-1:]
        if commit:
            uow.commit()
        else:
            uow.session.rollback()
    return int(event_id)


def test_a_committed_event_is_announced_with_its_id_and_nothing_else(store: Store) -> None:
    listener = _listener(store)
    event_id = _record_event(store, commit=True)
    assert _received(listener, 5.0) == [event_id]


def test_a_rolled_back_event_is_never_announced(store: Store) -> None:
    listener = _listener(store)
    _record_event(store, commit=False)
    assert _received(listener, 1.0) == []
    committed = _record_event(store, commit=True)  # the listener works: the next one arrives alone
    assert _received(listener, 5.0) == [committed]


def test_commits_within_the_gathering_window_share_one_notification(store: Store) -> None:
    """The announcer waits a moment after a burst's first commit, so a burst costs one round trip."""
    listener = _listener(store)
    announcer = EventAnnouncer(libpq_dsn(store.engine.url), gather_seconds=0.5)
    try:
        announcer.announce([101])
        announcer.announce([102, 103])  # well inside the half second
        notes = list(listener.notifies(timeout=5.0, stop_after=1))
        assert [note.payload for note in notes] == ["101,102,103"]
    finally:
        announcer.close()


def test_a_notification_follows_the_previous_one_no_sooner_than_the_spacing(store: Store) -> None:
    """However busy the worker, at most one notification per spacing: what comes meanwhile waits
    and is sent together (each one wakes every listener, so fewer is cheaper for all of them)."""
    listener = _listener(store)
    announcer = EventAnnouncer(libpq_dsn(store.engine.url), gather_seconds=0, spacing_seconds=1.0)
    try:
        announcer.announce([201])
        assert [note.payload for note in listener.notifies(timeout=5.0, stop_after=1)] == ["201"]
        announcer.announce([202])  # without the spacing it would be sent at once, alone
        time.sleep(0.1)
        announcer.announce([203])
        notes = list(listener.notifies(timeout=5.0, stop_after=1))
        assert [note.payload for note in notes] == ["202,203"]
    finally:
        announcer.close()


def test_nothing_is_sent_while_nobody_holds_the_audience_lock(store: Store) -> None:
    """Nobody listening anywhere: the announcer sends nothing (each notification would cost every
    worker its wake-up), and starts again at its next check once someone holds the lock."""
    listener = _listener(store, audience=False)
    announcer = EventAnnouncer(libpq_dsn(store.engine.url), gather_seconds=0, audience_seconds=0.3)
    try:
        announcer.announce([301])
        assert _received(listener, 1.0) == []
        announcer.announce([302])  # within the check's validity: not even queued
        assert _received(listener, 0.2) == []
        _hold_audience(listener)
        time.sleep(0.4)  # past the announcer's last check
        announcer.announce([303])
        assert _received(listener, 5.0) == [303]
    finally:
        announcer.close()


def test_a_process_that_gets_a_listener_announces_its_next_commit_at_once(store: Store) -> None:
    listener = _listener(store, audience=False)
    announcer = EventAnnouncer(libpq_dsn(store.engine.url), gather_seconds=0, audience_seconds=3600)
    try:
        announcer.announce([401])
        assert _received(listener, 1.0) == []  # nobody: and the announcer will not ask again for an hour
        _hold_audience(listener)
        announcer.expect_audience()  # what the feed does when its first stream arrives
        announcer.announce([402])
        assert _received(listener, 5.0) == [402]
    finally:
        announcer.close()


def test_the_audience_lock_is_held_while_someone_listens_and_released_with_its_connection(
    store: Store,
) -> None:
    async def scenario() -> list[bool]:
        presence = AudiencePresence(libpq_dsn(store.engine.url))
        seen = [_audience_held(store)]
        seen += [await presence.keep(True), _audience_held(store)]
        seen.append(await presence.keep(True))  # kept: not taken again
        await presence.keep(False)  # the last listener left
        seen.append(_audience_held(store))
        seen.append(await presence.keep(True))  # one came back
        await presence.close()  # the worker stops (or dies: the server drops its locks alike)
        seen.append(_audience_held(store))
        return seen

    assert asyncio.run(scenario()) == [False, True, True, False, False, True, False]


def test_taking_the_audience_lock_tells_every_worker_s_feed_at_once(store: Store) -> None:
    """So that the other workers' announcers start announcing within a round trip, not at their
    next check (``AUDIENCE_PAYLOAD``, which the feed hands to its store's announcer)."""
    listener = _listener(store, audience=False)

    async def take() -> None:
        presence = AudiencePresence(libpq_dsn(store.engine.url))
        await presence.keep(True)
        await presence.close()

    asyncio.run(take())
    assert [note.payload for note in listener.notifies(timeout=5.0, stop_after=1)] == [AUDIENCE_PAYLOAD]
