"""The purge runs in one worker at a time: a named lock that a second worker cannot take meanwhile."""

from __future__ import annotations

from datetime import timedelta

from adapter.services import ServiceContext
from adapter.services.maintenance import run_maintenance
from adapter.store import Store
from adapter.store.locks import try_named_lock


def test_a_named_lock_is_held_by_one_holder_at_a_time(db_url: str, store: Store) -> None:
    other = Store.from_url(db_url)  # another worker: its own engine and connections
    try:
        with try_named_lock(store, "purge") as first:
            with try_named_lock(other, "purge") as second:
                assert (first, second) == (True, False)
            with try_named_lock(other, "another") as unrelated:
                assert unrelated
        with try_named_lock(other, "purge") as after_release:
            assert after_release
    finally:
        other.dispose()


def test_maintenance_skips_the_purge_while_another_worker_purges(ctx: ServiceContext) -> None:
    with try_named_lock(ctx.store, "purge") as held:
        assert held
        skipped = run_maintenance(ctx, retention=timedelta(days=1))
    purged = run_maintenance(ctx, retention=timedelta(days=1))
    assert skipped.purged is None
    assert purged.purged is not None
