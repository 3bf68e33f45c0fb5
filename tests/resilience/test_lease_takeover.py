"""A reconciler in the SAME process must not share a lease with the commit it takes over.

A server runs its maintenance loop (reconcile) beside its requests, on the same ``ServiceContext``,
so both have the same ``worker_id``. When a commit's heartbeat stalls and its lease runs out, the
reconciler takes the lease over. The commit must then see that it lost the lease and stop before
COMMIT; if the lease owner were only the process's ``worker_id``, the commit would still find "its"
name on the lease, send COMMIT, and the reconciler (which asked STATUS a moment earlier) would record
"not committed": a batch in the legacy system for an import the store calls open, and a later commit
without the key would land a second batch.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta
from typing import Any

from adapter.domain.identity import Principal
from adapter.legacy.forwarding import ForwardingPort, ForwardingSession
from adapter.services import ImportService, ServiceContext
from adapter.services.commit import batch_ref_for
from legacy_sim.engine import LegacyEngine
from tests.support.wait import wait_until


class _Gates:
    def __init__(self) -> None:
        self.asked = threading.Event()  # the reconciler has its STATUS answer
        self.committed = threading.Event()  # the commit's COMMIT came back
        self.reconciler: threading.Thread | None = None


class _Session(ForwardingSession):
    def __init__(self, inner: Any, gates: _Gates) -> None:
        super().__init__(inner)
        self._gates = gates

    def commit(self) -> Any:
        batch = self._inner.commit()
        self._gates.committed.set()
        if self._gates.reconciler is not None:
            self._gates.reconciler.join(timeout=10)  # the reconciler records before this commit does
        return batch


class _Port(ForwardingPort):
    """The real port; STATUS is answered, then held until the commit's COMMIT came back (or 2 s)."""

    def __init__(self, inner: Any, gates: _Gates) -> None:
        super().__init__(inner)
        self._gates = gates

    def open_session(self) -> _Session:
        return _Session(self._inner.open_session(), self._gates)

    def batch_status(self, batch_ref: str) -> Any:
        status = self._inner.batch_status(batch_ref)
        self._gates.asked.set()
        self._gates.committed.wait(timeout=2)
        return status


def test_a_commit_whose_lease_ran_out_stops_even_if_the_reconciler_is_in_its_own_process(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    gates = _Gates()
    ctx.legacy = _Port(ctx.legacy, gates)
    reconciler = ImportService(dataclasses.replace(ctx))  # same process: same worker_id
    assert reconciler.ctx.worker_id == ctx.worker_id
    handle = service.begin(alice, "customers").handle
    service.add(alice, handle, [{"n": i} for i in range(5)])
    import_id = service.status(alice, handle).import_id
    resolutions: list[Any] = []

    def stall_then_reconcile(sent: int, total: int) -> None:
        if sent != total:
            return
        # The heartbeat stalled: the lease ran out while this commit is still alive.
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.latest_commit(import_id)
            operation.lease_expires_at = ctx.clock() - timedelta(seconds=1)
            operation_id = operation.id
            uow.commit()
        gates.reconciler = threading.Thread(
            target=lambda: resolutions.extend(reconciler.reconcile(operation_id))
        )
        gates.reconciler.start()
        assert gates.asked.wait(timeout=10)

    result = service.commit(alice, handle, progress=stall_then_reconcile)  # must not raise
    assert gates.reconciler is not None
    gates.reconciler.join(timeout=10)
    # The reconciler resumes the commit under its own lease (it ran before COMMIT); the first run
    # stops at its commit_sent write, which finds the lease taken.
    wait_until(lambda: service.status(alice, handle).status != "committing", what="the resumed run")

    view = service.status(alice, handle)
    mine = [
        b for b in legacy_engine.committed_batches() if b["batch_ref"] == batch_ref_for(result.operation_id)
    ]
    # Either way is honest, as long as the store and the legacy system agree:
    if view.status == "committed":
        assert [b["legacy_batch_id"] for b in mine] == [view.legacy_batch_id]
    else:
        assert (view.status, mine) == ("open", []), (result, resolutions)
    # ... and committing it again (another key, or none) never makes a second batch.
    again = service.commit(alice, handle)
    assert again.status == "committed"
    assert len(legacy_engine.committed_batches()) == 1


class _ReconcileDuringCommitReply(ForwardingPort):
    """The real port; while a COMMIT's reply is on its way, the lease runs out and a reconciler
    (same process) resolves the operation from STATUS before the commit gets to record it."""

    def __init__(self, inner: Any, on_reply: Any) -> None:
        super().__init__(inner)
        self._on_reply = on_reply

    def open_session(self) -> Any:
        port = self

        class Session(_Session):
            def commit(self) -> Any:
                batch = self._inner.commit()
                port._on_reply()
                return batch

        return Session(self._inner.open_session(), _Gates())


def test_a_commit_answers_from_the_record_when_a_reconciler_resolved_it_first(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = service.begin(alice, "customers").handle
    service.add(alice, handle, [{"n": i} for i in range(5)])
    import_id = service.status(alice, handle).import_id
    reconciler = ImportService(dataclasses.replace(ctx))
    resolutions: list[Any] = []

    def lease_runs_out_and_reconciler_resolves() -> None:
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.latest_commit(import_id)
            operation.lease_expires_at = ctx.clock() - timedelta(seconds=1)
            uow.commit()
        resolutions.extend(reconciler.reconcile(operation.id))

    ctx.legacy = _ReconcileDuringCommitReply(ctx.legacy, lease_runs_out_and_reconciler_resolves)

    result = service.commit(alice, handle)  # used to raise invalid_state: committed cannot become committed

    [batch] = legacy_engine.committed_batches()
    assert [(r.status, r.finding) for r in resolutions] == [("succeeded", "committed")]
    assert (result.status, result.legacy_batch_id) == ("committed", batch["legacy_batch_id"])
    assert service.status(alice, handle).status == "committed"
