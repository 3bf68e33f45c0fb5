"""The add on its own (PostgreSQL): one statement outside any transaction, written only where every
rule holds; anything else takes the checked path, which refuses or replays exactly as before.

The refusals themselves (another principal's handle, an expired import, quotas, bad records, a used
key) are tested in ``test_imports.py`` and ``test_quotas.py`` on both databases; after a begin on
this worker every one of them first tries the add on its own. Here: that it is taken, what it
writes, and that its events are announced like a committed transaction's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import event

from adapter.domain.identity import Principal
from adapter.services import ImportService, ServiceContext
from adapter.services.context import ImportTargets
from adapter.store.notify import audience_key, channel_for_schema, libpq_dsn
from tests.support.constants import POSTGRES

pytestmark = pytest.mark.parametrize("db_url", [POSTGRES], indirect=True)


@pytest.fixture
def commits(ctx: ServiceContext) -> Iterator[list[int]]:
    """Transactions committed on the store's engine (a unit of work's; the add on its own has none)."""
    seen: list[int] = []

    def count(_connection: Any) -> None:
        seen.append(1)

    event.listen(ctx.store.engine, "commit", count)
    yield seen
    event.remove(ctx.store.engine, "commit", count)


def test_an_add_after_a_begin_on_this_worker_commits_no_transaction(
    service: ImportService, ctx: ServiceContext, alice: Principal, commits: list[int]
) -> None:
    handle = service.begin(alice, "customers").handle
    commits.clear()

    first = service.add(alice, handle, [{"n": 1}, {"n": 2}])
    second = service.add(alice, handle, [{"n": 3}], idempotency_key="k3")

    assert commits == []
    assert (first.record_count, second.record_count, second.accepted) == (2, 3, 1)
    view = service.status(alice, handle)
    assert view.record_count == 3 and [o.kind for o in view.operations] == ["begin", "add", "add"]
    with ctx.store.unit_of_work() as uow:
        assert [(seq, data) for seq, data in uow.records.chunk(view.import_id, 0, 10)] == [
            (1, '{"n":1}'),
            (2, '{"n":2}'),
            (3, '{"n":3}'),
        ]
        [keyed] = [op for op in uow.operations.for_import(view.import_id) if op.idempotency_key == "k3"]
        assert keyed.result == {"accepted": 1, "record_count": 3, "first_seq": 3}
    again = service.add(alice, handle, [{"n": 3}], idempotency_key="k3")  # the key is used: replayed
    assert again.replayed and again.record_count == 3 and len(commits) == 0


def test_a_worker_that_did_not_begin_the_import_learns_its_target_on_the_first_add(
    service: ImportService, ctx: ServiceContext, alice: Principal, commits: list[int]
) -> None:
    handle = service.begin(alice, "customers").handle
    other = ImportService(dataclasses.replace(ctx, import_targets=ImportTargets()))  # another worker
    commits.clear()

    other.add(alice, handle, [{"n": 1}])
    checked = len(commits)
    other.add(alice, handle, [{"n": 2}])

    assert (checked, len(commits)) == (1, 1)
    assert service.status(alice, handle).record_count == 2


def test_a_refused_add_writes_nothing_and_says_why_as_the_checked_path_does(
    service: ImportService, ctx: ServiceContext, alice: Principal, bob: Principal
) -> None:
    from adapter.domain.errors import HandleNotFound

    handle = service.begin(alice, "customers").handle
    service.add(alice, handle, [{"n": 1}])

    with pytest.raises(HandleNotFound):
        service.add(bob, handle, [{"n": 2}])
    tight = ImportService(
        dataclasses.replace(ctx, quotas=dataclasses.replace(ctx.quotas, max_records_per_import=2))
    )
    tight.add(alice, handle, [{"n": 2}])
    with pytest.raises(Exception, match="more than 2 records"):
        tight.add(alice, handle, [{"n": 3}])

    view = service.status(alice, handle)
    assert view.record_count == 2 and [o.kind for o in view.operations] == ["begin", "add", "add"]


def test_the_add_on_its_own_announces_its_events_to_other_workers(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    handle = service.begin(alice, "customers").handle
    listener = psycopg.connect(libpq_dsn(ctx.store.engine.url), autocommit=True)
    try:
        row = listener.execute("SELECT current_schema()").fetchone()
        assert row is not None
        channel = channel_for_schema(str(row[0]))
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        # As another worker with a listen stream does: it holds the audience lock, and taking it
        # tells this worker's feed, which tells the store's announcer (store/notify.py).
        listener.execute("SELECT pg_advisory_lock_shared(%s)", (audience_key(channel),))
        ctx.store.expect_audience()

        service.add(alice, handle, [{"n": 1}])

        with ctx.store.unit_of_work() as uow:
            import_id = service.status(alice, handle).import_id
            added = {
                e.id
                for e in uow.events.after(0, 1000)
                if e.import_id == import_id and e.kind != "import.opened"
            }
        # The begin's own notification may come first (notifications are spaced: notify.py).
        heard: set[int] = set()
        for note in listener.notifies(timeout=5.0):
            heard.update(int(i) for i in note.payload.split(","))
            if added <= heard:
                break
        assert added and added <= heard
    finally:
        listener.close()
