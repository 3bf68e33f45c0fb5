"""The change feed behind notifications/resources/updated: every change once, none from before."""

from __future__ import annotations

import pytest

from adapter.domain.identity import Principal
from adapter.services import ImportService, ServiceContext
from adapter.store.tables import EventRow
from tests.support.constants import POSTGRES


def test_the_feed_names_each_changed_import_once_and_not_the_past(
    service: ImportService, alice: Principal
) -> None:
    before = service.begin(alice, "old").handle
    follower = service.follow_changes()
    assert follower.poll() == []

    handle = service.begin(alice, "new").handle
    service.add(alice, handle, [{"n": 1}])

    assert follower.poll() == [handle]
    assert follower.poll() == []
    service.add(alice, before, [{"n": 1}])
    assert follower.poll() == [before]


@pytest.mark.parametrize("db_url", [POSTGRES], indirect=True)
def test_an_event_that_commits_after_a_later_one_is_still_reported(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    """PostgreSQL hands out ids at insert; a slower transaction can make a lower id visible later."""
    first = service.begin(alice, "slow").import_id
    second = service.begin(alice, "fast").import_id
    follower = service.follow_changes()
    store = ctx.store
    with store.unit_of_work() as slow:
        slow.events.record("import.test", import_id=first)
        slow.flush()  # takes the lower id, not yet visible to anyone
        with store.unit_of_work() as fast:
            fast.events.record("import.test", import_id=second)
            fast.commit()
        assert follower.poll() == [ctx.codec.handle_for(second)]
        slow.commit()

    assert follower.poll() == [ctx.codec.handle_for(first)]
    assert follower.poll() == []
    with store.unit_of_work() as uow:
        assert uow.session.query(EventRow).filter_by(kind="import.test").count() == 2
