"""Event notifications on PostgreSQL (``adapter/store/notify.py``): sent after the writing
transaction commits, carrying its event ids only, never for a transaction that rolls back."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from psycopg import sql

from adapter.store import Store
from adapter.store.notify import EventAnnouncer, channel_for_schema, libpq_dsn
from tests.support.constants import POSTGRES

pytestmark = pytest.mark.parametrize("db_url", [POSTGRES], indirect=True)


def _listener(store: Store) -> psycopg.Connection[Any]:
    connection = psycopg.connect(libpq_dsn(store.engine.url), autocommit=True)
    row = connection.execute("SELECT current_schema()").fetchone()
    assert row is not None
    connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel_for_schema(str(row[0])))))
    return connection


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
