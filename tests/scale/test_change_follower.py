"""The change follower reads only what is new or still missing, and still reports each change once."""

from __future__ import annotations

import os
from typing import Any

import pytest

from adapter.domain.identity import Principal
from adapter.services import ImportService

_NO_POSTGRES = not os.environ.get("ADAPTER_TEST_POSTGRES_URL")


def postgres_only(test: Any) -> Any:
    """Ids taken by a transaction that is still open: PostgreSQL's sequences show the gap."""
    test = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)(test)
    test = pytest.mark.postgres(test)
    return pytest.mark.skipif(_NO_POSTGRES, reason="ADAPTER_TEST_POSTGRES_URL not set")(test)


@postgres_only
def test_a_rolled_back_event_leaves_a_gap_that_neither_blocks_nor_repeats(
    service: ImportService, alice: Principal
) -> None:
    handle = service.begin(alice, "gap").handle
    import_id = service.status(alice, handle).import_id
    follower = service.follow_changes()
    store = service.ctx.store
    with store.unit_of_work() as doomed:
        doomed.events.record("import.test", import_id=import_id)
        doomed.flush()  # takes an id, then rolls back: that id never appears
    for _ in range(3):
        service.add(alice, handle, [{"n": 1}])
        assert follower.poll() == [handle]
        assert follower.poll() == []


def test_many_events_between_two_reads_are_reported_once_each_import(
    service: ImportService, alice: Principal
) -> None:
    follower = service.follow_changes()
    handles = [service.begin(alice, f"t{i}").handle for i in range(5)]
    for handle in handles:
        service.add(alice, handle, [{"n": 1}])
    assert follower.poll() == handles
    assert follower.poll() == []


def test_a_follower_with_a_small_batch_catches_up_over_several_reads(
    service: ImportService, alice: Principal
) -> None:
    from adapter.services.listing import ChangeFollower

    follower = ChangeFollower(service.ctx, batch=2)
    handles = [service.begin(alice, f"t{i}").handle for i in range(4)]
    reported: list[str] = []
    for _ in range(10):
        reported += follower.poll()
    assert sorted(set(reported)) == sorted(handles)
    assert follower.poll() == []


def test_while_nobody_listens_changes_are_passed_over_and_a_new_listener_starts_from_now(
    service: ImportService, alice: Principal
) -> None:
    follower = service.follow_changes()
    before = service.begin(alice, "t").handle
    service.add(alice, before, [{"n": 1}])
    assert follower.poll_changes(lambda: False) == []
    after = service.begin(alice, "t").handle
    assert [change.handle for change in follower.poll_changes(lambda: True)] == [after]


def test_a_listener_arriving_during_the_read_gets_the_full_read(
    service: ImportService, alice: Principal
) -> None:
    follower = service.follow_changes()
    handle = service.begin(alice, "t").handle
    answers = iter([False, True])  # nobody before the read, someone right after it
    assert [change.handle for change in follower.poll_changes(lambda: next(answers))] == [handle]
    assert follower.poll_changes(lambda: True) == []


@postgres_only
def test_an_event_still_uncommitted_when_nobody_listened_is_reported_once_it_commits(
    service: ImportService, alice: Principal
) -> None:
    late = service.begin(alice, "late").handle
    late_id = service.status(alice, late).import_id
    follower = service.follow_changes()
    store = service.ctx.store
    with store.unit_of_work() as slow:
        slow.events.record("import.test", import_id=late_id)
        slow.flush()  # its id is taken now, below the ids of the next changes
        quick = service.begin(alice, "quick").handle
        assert follower.poll_changes(lambda: False) == []  # passes over the quick one, remembers the gap
        slow.commit()
    assert [change.handle for change in follower.poll_changes(lambda: True)] == [late]
    assert quick != late


@postgres_only
@pytest.mark.anyio
async def test_the_pg_feed_reads_nothing_for_nobody_and_tells_a_new_listener_at_once(
    service: ImportService, alice: Principal
) -> None:
    """A NOTIFY wakes the feed, but with nobody listening here it does not read the event table (the
    catch-up interval, 30 s here, would); once someone listens, the next change is read and told."""
    from functools import partial

    import anyio
    import anyio.to_thread
    from sqlalchemy import event

    from adapter.entrypoints.mcp.feed_pg import run_pg_event_feed
    from adapter.services.listing import ImportChange

    reads: list[str] = []

    def count_reads(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("SELECT events."):  # the follower's reads, ids alone or whole events
            reads.append(statement)

    heard: list[str] = []

    async def publish(changes: list[ImportChange]) -> None:
        heard.extend(change.handle for change in changes)

    audience = [False]
    engine = service.ctx.store.engine
    event.listen(engine, "before_cursor_execute", count_reads)
    try:
        async with anyio.create_task_group() as tasks:
            feed = partial(run_pg_event_feed, catch_up_seconds=30.0, listening=lambda: audience[0])
            tasks.start_soon(feed, service, publish)
            with anyio.fail_after(10):  # the follower's first read, then the catch-up right after LISTEN
                while len(reads) < 2:
                    await anyio.sleep(0.02)
            read_at_start = len(reads)
            handle = (await anyio.to_thread.run_sync(service.begin, alice, "quiet")).handle
            for n in range(5):  # five transactions, five notifications
                await anyio.to_thread.run_sync(service.add, alice, handle, [{"n": n}])
            await anyio.sleep(0.3)  # several times the announcer's gathering
            assert len(reads) == read_at_start
            audience[0] = True
            await anyio.to_thread.run_sync(service.add, alice, handle, [{"n": 5}])
            with anyio.fail_after(5):  # well inside the 30 s catch-up: the notification woke it
                while handle not in heard:
                    await anyio.sleep(0.02)
            assert len(reads) > read_at_start
            tasks.cancel_scope.cancel()
    finally:
        event.remove(engine, "before_cursor_execute", count_reads)


@postgres_only
@pytest.mark.anyio
async def test_the_pg_feed_with_arrivals_sleeps_until_someone_comes(
    service: ImportService, alice: Principal
) -> None:
    """Told of arrivals, a feed with nobody to tell does not look for an audience ten times a second
    (it did: a sixth of an idle worker's CPU); the arrival itself wakes it, and the next change is
    told long before the 30 s catch-up read would."""
    from functools import partial

    import anyio
    import anyio.to_thread

    from adapter.entrypoints.mcp.feed_pg import run_pg_event_feed
    from adapter.services.listing import ImportChange

    heard: list[str] = []
    asked: list[bool] = []
    audience = [False]
    arrived: list[Any] = []

    async def publish(changes: list[ImportChange]) -> None:
        heard.extend(change.handle for change in changes)

    def listening() -> bool:
        asked.append(audience[0])
        return audience[0]

    async with anyio.create_task_group() as tasks:
        feed = partial(run_pg_event_feed, catch_up_seconds=30.0, listening=listening, arrivals=arrived.append)
        tasks.start_soon(feed, service, publish)
        with anyio.fail_after(10):
            while not arrived or not asked:
                await anyio.sleep(0.02)
        await anyio.sleep(0.5)  # settled: the first reads are done
        before = len(asked)
        await anyio.sleep(1.0)
        assert len(asked) - before <= 1  # at the 0.1 s poll it would be about ten
        handle = (await anyio.to_thread.run_sync(service.begin, alice, "arriving")).handle
        audience[0] = True
        arrived[0]()  # what McpGateway.watch_audience's first listener calls
        await anyio.to_thread.run_sync(service.add, alice, handle, [{"n": 1}])
        with anyio.fail_after(5):  # the arrival woke it, not the catch-up read 30 s away
            while handle not in heard:
                await anyio.sleep(0.02)
        tasks.cancel_scope.cancel()
