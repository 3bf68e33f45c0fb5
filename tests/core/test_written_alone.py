"""Writes on their own (PostgreSQL): a begin, an add, a commit's recovery point and its finish as one
statement outside any transaction, written only where every rule holds; anything else takes the checked path,
which refuses or replays exactly as before.

The refusals themselves (another principal's handle, an expired import, quotas, bad records, a used
key, a lost lease, a stop asked) are tested on both databases elsewhere (``test_imports.py``,
``test_quotas.py``, the commit's tests); after a begin on this worker every add first tries to be
written on its own. Here: that each is taken, what it writes, that what it does not write is said by
the checked path, and that its events are announced like a committed transaction's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import event, func, select

from adapter.domain.errors import IdempotencyKeyReused
from adapter.domain.identity import Principal, fingerprint
from adapter.domain.quotas import QuotaExceeded
from adapter.domain.states import ImportState, OperationState
from adapter.domain.vocabulary import RecoveryPoint
from adapter.services import ImportService, ServiceContext
from adapter.services.commit import bookkeeping
from adapter.services.commit import claim as claiming
from adapter.services.commit.finish import Outcome, finish
from adapter.services.context import ImportTargets
from adapter.store import Store
from adapter.store.notify import audience_key, channel_for_schema, libpq_dsn
from adapter.store.repositories import CommitFinish
from adapter.store.tables import ImportRow, OperationRow, new_event
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


def _begun(ctx: ServiceContext, import_id: str) -> tuple[list[tuple[str, str, Any]], list[tuple[str, Any]]]:
    """The import's operations (kind, status, result) and events (kind, detail), oldest first."""
    with ctx.store.unit_of_work() as uow:
        operations = [(o.kind, o.status, o.result) for o in uow.operations.for_import(import_id)]
        events = [(e.kind, e.detail) for e in uow.events.after(0, 10_000) if e.import_id == import_id]
    return operations, events


def test_a_begin_commits_no_transaction_and_writes_what_the_checked_path_writes(
    service: ImportService, ctx: ServiceContext, alice: Principal, commits: list[int]
) -> None:
    begun = service.begin(alice, "customers", idempotency_key="b1", ttl_seconds=600)

    assert commits == []
    operations, events = _begun(ctx, begun.import_id)
    result = {"import_id": begun.import_id, "target": "customers", "expires_at": begun.expires_at.isoformat()}
    assert operations == [("begin", "succeeded", result)]
    assert events == [("import.opened", {"ttl_seconds": 600}), ("operation.succeeded", {"kind": "begin"})]
    view = service.status(alice, begun.handle)
    assert (view.status, view.target, view.record_count, view.expires_at) == (
        "open",
        "customers",
        0,
        begun.expires_at,
    )

    again = service.begin(alice, "customers", idempotency_key="b1", ttl_seconds=600)  # the key is used
    assert again.replayed and again.import_id == begun.import_id and commits == []
    with pytest.raises(IdempotencyKeyReused):
        service.begin(alice, "orders", idempotency_key="b1")
    assert len(service.list_imports(alice, cursor=None, limit=10).items) == 1


def test_a_begin_past_the_open_imports_quota_writes_nothing_and_is_refused(
    service: ImportService, ctx: ServiceContext, alice: Principal, bob: Principal
) -> None:
    ctx.quotas = dataclasses.replace(ctx.quotas, max_open_imports_per_principal=2)
    service.begin(alice, "customers")
    service.begin(alice, "customers")

    with pytest.raises(QuotaExceeded, match="already has 2 open imports"):
        service.begin(alice, "customers")

    assert len(service.list_imports(alice, cursor=None, limit=10).items) == 2
    service.begin(bob, "customers")  # another principal's quota is its own
    with ctx.store.unit_of_work() as uow:
        imports = uow.session.scalar(select(func.count()).select_from(ImportRow))
        begins = uow.session.scalar(select(func.count()).where(OperationRow.kind == "begin"))
    assert (imports, begins) == (3, 3)


def _claimed(service: ImportService, ctx: ServiceContext, alice: Principal) -> bookkeeping.Claim:
    handle = service.begin(alice, "customers").handle
    service.add(alice, handle, [{"n": 1}])
    request = fingerprint("commit", {"handle": ctx.codec.digest(handle)})
    claim = claiming.claim_import(ctx, alice, handle, None, request)
    assert isinstance(claim, bookkeeping.Claim)
    return claim


def _point(ctx: ServiceContext, claim: bookkeeping.Claim) -> tuple[str | None, int, list[Any]]:
    with ctx.store.unit_of_work() as uow:
        operation = uow.operations.get(claim.operation_id)
        assert operation is not None
        events = [e.detail for e in uow.events.after(0, 10_000) if e.operation_id == claim.operation_id]
        return operation.recovery_point, operation.attempts, [d for d in events if d and "point" in d]


def test_a_recovery_point_of_the_lease_holder_commits_no_transaction(
    service: ImportService, ctx: ServiceContext, alice: Principal, commits: list[int]
) -> None:
    claim = _claimed(service, ctx, alice)
    commits.clear()

    bookkeeping.set_recovery_point(ctx, claim, "commit_sent")
    bookkeeping.set_recovery_point(ctx, claim, "replaying", attempt=True)

    assert commits == []
    point, attempts, noted = _point(ctx, claim)
    assert (point, attempts) == ("replaying", 2)
    assert noted[-2:] == [{"point": "commit_sent", "attempt": 1}, {"point": "replaying", "attempt": 2}]


def test_a_recovery_point_without_the_lease_or_after_a_stop_writes_nothing_and_says_why(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    claim = _claimed(service, ctx, alice)
    before = _point(ctx, claim)

    with pytest.raises(bookkeeping.LeaseLost):
        bookkeeping.set_recovery_point(
            ctx, dataclasses.replace(claim, lease_owner="another-worker"), "commit_sent"
        )
    assert _point(ctx, claim) == before
    with ctx.store.unit_of_work() as uow:
        operation = uow.operations.get(claim.operation_id)
        assert operation is not None
        operation.stop_requested = "cancel"
        uow.commit()
    with pytest.raises(bookkeeping.StopRequested):
        bookkeeping.set_recovery_point(ctx, claim, "commit_sent")
    assert _point(ctx, claim) == before


_COMMITTED = Outcome(
    OperationState.SUCCEEDED,
    ImportState.COMMITTED,
    RecoveryPoint.COMMITTED,
    result={"legacy_batch_id": "B-1", "record_count": 1},
    legacy_batch_id="B-1",
)
_REFUSED = Outcome(
    OperationState.FAILED,
    ImportState.OPEN,
    RecoveryPoint.FAILED_BEFORE_COMMIT,
    error={"code": "legacy_refused", "refusal": {"code": "E1", "position": 1, "field": "n", "message": "no"}},
)


def _finished(ctx: ServiceContext, claim: bookkeeping.Claim) -> tuple[Any, ...]:
    """What a finish wrote: the operation's and the import's columns, the finish's events."""
    with ctx.store.unit_of_work() as uow:
        operation, row = bookkeeping.get_both(uow, claim)
        events = [
            (e.kind, e.state, e.detail)
            for e in uow.events.after(0, 10_000)
            if e.operation_id == claim.operation_id and e.kind != "operation.recovery_point"
        ][-2:]
        return (
            (operation.status, operation.recovery_point, operation.result, operation.error),
            (operation.lease_owner, operation.lease_expires_at, operation.version),
            (row.state, row.legacy_batch_id, row.version),
            events,
        )


@pytest.mark.parametrize("outcome", [_COMMITTED, _REFUSED], ids=["committed", "refused"])
def test_a_finish_of_the_lease_holder_commits_no_transaction_and_writes_what_the_checked_path_writes(
    service: ImportService,
    ctx: ServiceContext,
    alice: Principal,
    commits: list[int],
    monkeypatch: pytest.MonkeyPatch,
    outcome: Outcome,
) -> None:
    alone = _claimed(service, ctx, alice)
    commits.clear()
    answer = finish(ctx, alone, outcome)
    assert commits == []
    monkeypatch.setattr(Store, "writes_alone", property(lambda _store: False))
    checked = _claimed(service, ctx, alice)
    commits.clear()
    checked_answer = finish(ctx, checked, outcome)
    assert len(commits) == 1

    assert _finished(ctx, alone) == _finished(ctx, checked)
    assert dataclasses.replace(answer, handle="", operation_id="") == dataclasses.replace(
        checked_answer, handle="", operation_id=""
    )
    operation, lease, import_row, events = _finished(ctx, alone)
    assert (
        operation[0] == outcome.status and lease[:2] == (None, None) and import_row[0] == outcome.import_state
    )
    assert [kind for kind, _, _ in events] == [
        f"operation.{outcome.status.value}",
        f"import.{outcome.import_state.value}",
    ]


def test_a_finish_after_an_abort_was_asked_takes_the_checked_path_and_aborts_the_import(
    service: ImportService, ctx: ServiceContext, alice: Principal, commits: list[int]
) -> None:
    claim = _claimed(service, ctx, alice)
    with ctx.store.unit_of_work() as uow:
        operation = uow.operations.get(claim.operation_id)
        assert operation is not None
        operation.stop_requested = "abort"
        uow.commit()
    commits.clear()

    stopped = Outcome(OperationState.CANCELLED, ImportState.OPEN, RecoveryPoint.CANCELLED_BEFORE_COMMIT)
    finish(ctx, claim, stopped)

    assert len(commits) == 1 and claim.abort_asked
    (status, *_), _, (state, *_), _ = _finished(ctx, claim)
    assert (status, state) == ("cancelled", "aborted")


def test_a_finish_where_the_import_changed_behind_the_run_writes_nothing_of_it_on_its_own(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    """The operation is still the run's, the import is not as it claimed it: the statement must not
    keep the operation's update (outside a transaction nothing else would undo it)."""
    claim = _claimed(service, ctx, alice)
    with ctx.store.unit_of_work() as uow:
        row = uow.imports.get(claim.import_id)
        assert row is not None
        row.record_count += 1  # the store changed behind the kit's back
        uow.commit()
    before = _finished(ctx, claim)

    written = ctx.store.finish_if_held(
        CommitFinish(
            operation_id=claim.operation_id,
            owner=claim.lease_owner,
            status="succeeded",
            recovery_point="committed",
            result={"legacy_batch_id": "B-1", "record_count": claim.total},
            error=None,
            import_id=claim.import_id,
            record_count=claim.total,
            import_state="committed",
            legacy_batch_id="B-1",
            events=[new_event("operation.succeeded", claim.import_id, claim.operation_id, "succeeded", {})],
        )
    )

    assert not written
    assert _finished(ctx, claim) == before  # the operation still in progress under the run's lease
