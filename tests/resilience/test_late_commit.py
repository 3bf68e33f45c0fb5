"""A COMMIT that lands late, on SQLite and PostgreSQL: a TCP proxy between the kit and the simulator
holds one COMMIT longer than the grace period, so the kit judges it ``not_committed`` before it lands.

* A new commit of the import asks about every earlier batch reference first and stops at
  ``needs_operator`` instead of making a second batch.
* If the second commit got in before the held one landed, the watch over recent verdicts finds the
  second batch and raises ``needs_operator`` with an event (and the metric counts it).
* A late batch with nothing else committed is recorded as the import's commit.
* Imports whose commits all succeeded cost the legacy system no question in the watch, and do not
  crowd a doubted one out of it.
* The watch lasts whatever the port said after the verdict: a retry under the same key that failed
  because the system was down keeps the import watched.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from adapter.domain.cursors import CursorCodec
from adapter.domain.identity import HandleCodec, Principal
from adapter.legacy.forwarding import ForwardingPort
from adapter.legacy.simulator import SimulatorPort
from adapter.ports.legacy import BatchStatus
from adapter.services import CommitPolicy, ImportService, ServiceContext
from adapter.services.late_commits import LATE_COMMIT_EVENT, late_commit_counts, watch_recent_verdicts
from adapter.store import Store
from legacy_sim.engine import LegacyEngine

LEGACY_TIMEOUT = 1.0
GRACE = 1.5
HOLD_LIMIT = 30.0  # a COMMIT held until released lands after this at the latest (a test that forgot)
SECRET = b"late-commit-secret-" + b"x" * 20


class CommitHoldingProxy:
    """Forwards the simulator's line protocol; holds the next COMMIT line for some seconds, or until
    the test releases it.

    A held COMMIT is delivered even if the kit has hung up meanwhile (the upstream connection stays
    open until it is sent), as a slow network path would. Holding until released, rather than for a
    fixed time, keeps the order of verdict and landing the test's to choose on a loaded machine.
    """

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()[:2]
        self._holds: list[float | None] = []  # None: until released
        self._released = threading.Event()
        self._lock = threading.Lock()
        self.down = False  # while set, every new connection is closed at once (the system is down)
        self.delivered = threading.Event()
        self.lose_void_reply = False  # the next VOID is applied, its answer lost, the system down
        self._muted: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def hold_next_commit(self, seconds: float | None = None) -> None:
        """Hold the next COMMIT for ``seconds``, or until :meth:`release` when None."""
        with self._lock:
            self._holds.append(seconds)
        self._released.clear()
        self.delivered.clear()

    def release(self) -> None:
        """Let a COMMIT held until released go on."""
        self._released.set()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self._to_upstream, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._to_client, args=(upstream, client), daemon=True).start()

    def _to_upstream(self, client: socket.socket, upstream: socket.socket) -> None:
        with contextlib.suppress(OSError), client.makefile("rb") as lines:
            for line in lines:
                if line.startswith(b"COMMIT"):
                    with self._lock:
                        held = bool(self._holds)
                        hold = self._holds.pop(0) if held else 0.0
                    if held:
                        if hold is None:
                            self._released.wait(HOLD_LIMIT)
                        else:
                            time.sleep(hold)
                        upstream.sendall(line)
                        self.delivered.set()
                        continue
                if line.startswith(b"VOID") and self.lose_void_reply:
                    self.lose_void_reply = False
                    self._muted.add(client)
                    upstream.sendall(line)
                    time.sleep(0.3)  # applied by now; its answer goes nowhere
                    self.down = True
                    client.close()
                    break
                upstream.sendall(line)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _to_client(self, upstream: socket.socket, client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if client in self._muted:
                    continue
                with contextlib.suppress(OSError):
                    client.sendall(data)
        for end in (upstream, client):
            with contextlib.suppress(OSError):
                end.close()


@pytest.fixture
def proxy(legacy_address: tuple[str, int]) -> Iterator[CommitHoldingProxy]:
    running = CommitHoldingProxy(legacy_address)
    yield running
    running.release()
    running.close()


@pytest.fixture
def late_service(store: Store, proxy: CommitHoldingProxy) -> ImportService:
    host, port = proxy.address
    ctx = ServiceContext(
        store=store,
        legacy=SimulatorPort.tcp(host, port, timeout=LEGACY_TIMEOUT),
        codec=HandleCodec(SECRET),
        cursors=CursorCodec(SECRET),
        commit_policy=CommitPolicy(
            retry_wait_initial=0.001, retry_wait_max=0.01, unknown_grace_seconds=GRACE
        ),
    )
    return ImportService(ctx)


def judged_not_committed(
    service: ImportService, who: Principal, proxy: CommitHoldingProxy
) -> tuple[str, str]:
    """(handle, operation id) of a commit whose COMMIT is held past the grace period and that the
    reconciler has already judged not_committed."""
    handle = service.begin(who, "customers").handle
    service.add(who, handle, [{"n": 1}, {"n": 2}])
    proxy.hold_next_commit()  # until released: the verdict comes first, however slow the machine
    first = service.commit(who, handle, idempotency_key="first")
    assert first.status == "outcome_unknown", first
    time.sleep(GRACE + 0.1)
    [resolution] = service.reconcile()
    assert (resolution.status, resolution.finding) == ("failed", "not_committed")
    assert service.status(who, handle).status == "open"
    assert first.operation_id is not None
    return handle, first.operation_id


def late_events(service: ImportService) -> list[Any]:
    with service.ctx.store.unit_of_work() as uow:
        return [e for e in uow.events.after(0, 10_000) if e.kind == LATE_COMMIT_EVENT]


def test_a_new_commit_asks_about_earlier_batches_and_stops(
    late_service: ImportService, alice: Principal, proxy: CommitHoldingProxy, legacy_engine: LegacyEngine
) -> None:
    handle, _ = judged_not_committed(late_service, alice, proxy)
    proxy.release()
    assert proxy.delivered.wait(10)  # the held COMMIT lands now, after its not_committed verdict
    time.sleep(0.3)
    assert len(legacy_engine.committed_batches()) == 1

    again = late_service.commit(alice, handle, idempotency_key="second")

    assert again.status == "outcome_unknown"  # needs_operator is answered as outcome_unknown
    assert again.error == "earlier_commit_landed"
    view = late_service.operation_status(alice, operation_id=again.operation_id)
    assert (view.status, view.recovery_point) == ("needs_operator", "asked_before_commit")
    assert len(legacy_engine.committed_batches()) == 1, "no second batch"
    assert late_service.status(alice, handle).status == "committed"


def test_a_second_batch_is_found_by_the_watch(
    late_service: ImportService, alice: Principal, proxy: CommitHoldingProxy, legacy_engine: LegacyEngine
) -> None:
    handle, first_id = judged_not_committed(late_service, alice, proxy)
    second = late_service.commit(alice, handle, idempotency_key="second")  # before the held one lands
    assert second.status == "committed"
    assert late_service.maintain().resolutions == []
    assert late_events(late_service) == []  # nothing to see yet

    proxy.release()
    assert proxy.delivered.wait(10)
    time.sleep(0.3)
    assert len(legacy_engine.committed_batches()) == 2  # the late COMMIT made a second batch

    late_service.maintain()

    view = late_service.operation_status(alice, operation_id=first_id)
    assert view.status == "needs_operator"
    [found] = late_events(late_service)
    assert (found.operation_id, found.detail["finding"]) == (first_id, "second_batch")
    assert late_commit_counts(late_service.ctx) == {"second_batch": 1}
    late_service.maintain()  # found once, not again on every pass
    assert len(late_events(late_service)) == 1


def test_a_late_batch_alone_is_recorded_as_the_commit(
    late_service: ImportService, alice: Principal, proxy: CommitHoldingProxy, legacy_engine: LegacyEngine
) -> None:
    handle, first_id = judged_not_committed(late_service, alice, proxy)
    proxy.release()
    assert proxy.delivered.wait(10)
    time.sleep(0.3)

    late_service.maintain()

    view = late_service.operation_status(alice, operation_id=first_id)
    assert view.status == "succeeded"
    assert late_service.status(alice, handle).status == "committed"
    assert [e.detail["finding"] for e in late_events(late_service)] == ["late_commit_recorded"]
    assert len(legacy_engine.committed_batches()) == 1


class CountingPort(ForwardingPort):
    """The real simulator port, counting the ``batch_status`` questions asked of it."""

    asked: list[str]

    def batch_status(self, batch_ref: str) -> BatchStatus:
        self.asked.append(batch_ref)
        return super().batch_status(batch_ref)


def test_the_watch_asks_only_about_imports_with_a_not_committed_verdict(
    late_service: ImportService, alice: Principal, proxy: CommitHoldingProxy
) -> None:
    for n in range(3):  # three imports committed at once: nothing about them can be late
        handle = late_service.begin(alice, "customers").handle
        late_service.add(alice, handle, [{"n": n}])
        assert late_service.commit(alice, handle, idempotency_key=f"ok-{n}").status == "committed"
    _doubted, first_id = judged_not_committed(late_service, alice, proxy)
    counting = CountingPort(late_service.ctx.legacy)
    counting.asked = []
    late_service.ctx.legacy = counting

    late_service.maintain()

    with late_service.ctx.store.unit_of_work() as uow:
        first = uow.operations.get(first_id)
        assert first is not None
        assert counting.asked == [first.batch_ref], "only the doubted import's batch is asked about"


def test_the_watch_goes_on_after_a_retry_failed_while_the_system_was_down(
    late_service: ImportService, alice: Principal, proxy: CommitHoldingProxy, legacy_engine: LegacyEngine
) -> None:
    """The not_committed verdict stands in the operation's history: a retry under the same key that
    failed for another reason (the system was down) does not end the watch over it."""
    handle, first_id = judged_not_committed(late_service, alice, proxy)
    proxy.down = True
    retried = late_service.commit(alice, handle, idempotency_key="first")
    proxy.down = False
    assert retried.operation_id == first_id
    view = late_service.operation_status(alice, operation_id=first_id)
    assert view.status == "failed" and view.error is not None and view.error["code"] != "not_committed"
    proxy.release()
    assert proxy.delivered.wait(10)  # the held COMMIT lands now
    time.sleep(0.3)

    late_service.maintain()

    assert late_service.operation_status(alice, operation_id=first_id).status == "succeeded"
    assert late_service.status(alice, handle).status == "committed"
    assert [e.detail["finding"] for e in late_events(late_service)] == ["late_commit_recorded"]
    assert len(legacy_engine.committed_batches()) == 1


def test_commits_that_succeeded_do_not_crowd_a_doubted_import_out_of_the_watch(
    late_service: ImportService, alice: Principal, proxy: CommitHoldingProxy
) -> None:
    _handle, first_id = judged_not_committed(late_service, alice, proxy)
    for n in range(3):  # settled after the verdict: newer than it
        other = late_service.begin(alice, "customers").handle
        late_service.add(alice, other, [{"n": n}])
        assert late_service.commit(alice, other, idempotency_key=f"ok-{n}").status == "committed"
    proxy.release()
    assert proxy.delivered.wait(10)
    time.sleep(0.3)

    [found] = watch_recent_verdicts(late_service.ctx, limit=2)

    assert (found.operation_id, found.finding) == (first_id, "late_commit_recorded")


def test_a_same_key_retry_and_the_late_commit_give_one_batch_the_duplicate_voided_and_counted(
    late_service: ImportService, alice: Principal, proxy: CommitHoldingProxy, legacy_engine: LegacyEngine
) -> None:
    """Issue 21: the first COMMIT is held past the grace period and judged not_committed; the client
    retries with the same key, as the tool tells it to, before the held COMMIT lands; then it lands,
    under the same batch reference. One key must not leave two batches standing."""
    handle, first_id = judged_not_committed(late_service, alice, proxy)
    retried = late_service.commit(alice, handle, idempotency_key="first")  # the same key
    assert (retried.status, retried.operation_id) == ("committed", first_id)
    proxy.release()
    assert proxy.delivered.wait(10)
    time.sleep(0.3)
    batches = legacy_engine.committed_batches()
    assert len(batches) == 2 and {b["batch_ref"] for b in batches} == {batches[0]["batch_ref"]}

    late_service.maintain()

    standing = [b for b in legacy_engine.committed_batches() if not b["voided"]]
    assert [b["legacy_batch_id"] for b in standing] == [retried.legacy_batch_id], "one batch stands"
    view = late_service.operation_status(alice, operation_id=first_id)
    assert view.status == "succeeded"
    assert late_service.status(alice, handle).legacy_batch_id == retried.legacy_batch_id
    [found] = late_events(late_service)
    assert found.detail["finding"] == "duplicate_voided"
    assert late_commit_counts(late_service.ctx) == {"duplicate_voided": 1}
    late_service.maintain()  # found once, not again on every pass
    assert len(late_events(late_service)) == 1


def test_a_void_whose_answer_was_lost_is_found_voided_and_recorded_not_left_to_a_person(
    late_service: ImportService, alice: Principal, proxy: CommitHoldingProxy, legacy_engine: LegacyEngine
) -> None:
    """The watch VOIDs the duplicate; the VOID is applied but its answer is lost and the system
    stays down through every retry and the question after them. Nothing is recorded then (not
    ``needs_operator``: the kit does not know that the VOID failed); once the system is back, the
    next pass finds the batch voided and records it, once."""
    handle, first_id = judged_not_committed(late_service, alice, proxy)
    retried = late_service.commit(alice, handle, idempotency_key="first")
    proxy.release()
    assert proxy.delivered.wait(10)
    time.sleep(0.3)
    late = next(
        b for b in legacy_engine.committed_batches() if b["legacy_batch_id"] != retried.legacy_batch_id
    )
    proxy.lose_void_reply = True

    late_service.maintain()

    voided = [b["legacy_batch_id"] for b in legacy_engine.committed_batches() if b["voided"]]
    assert voided == [late["legacy_batch_id"]], "the VOID was applied"
    assert late_service.operation_status(alice, operation_id=first_id).status == "succeeded"
    assert late_events(late_service) == [], "nothing recorded while the outcome is unknown"
    proxy.down = False

    late_service.maintain()
    late_service.maintain()

    assert late_service.operation_status(alice, operation_id=first_id).status == "succeeded"
    [found] = late_events(late_service)
    assert found.detail == {"finding": "duplicate_voided", "batches": 2, "voided": [late["legacy_batch_id"]]}
    standing = [b["legacy_batch_id"] for b in legacy_engine.committed_batches() if not b["voided"]]
    assert standing == [retried.legacy_batch_id]


@pytest.mark.parametrize("void_answer_lost", [False, True], ids=["void-answered", "void-answer-lost"])
def test_a_held_commit_and_an_unknown_same_key_retry_both_landing_leave_one_batch(
    late_service: ImportService,
    alice: Principal,
    proxy: CommitHoldingProxy,
    legacy_engine: LegacyEngine,
    void_answer_lost: bool,
) -> None:
    """The same-key retry's reply is lost too (outcome unknown), then both COMMITs land: the
    reconciler finds two batches of the same records under the operation's reference, keeps the
    oldest, voids the other and counts it, instead of leaving it to a person. When the VOID is
    applied but its answer lost while the system goes down, the reconciler records nothing and
    leaves the operation unknown; once the system is back it finds the repeat voided and counts it."""
    handle, first_id = judged_not_committed(late_service, alice, proxy)
    proxy.hold_next_commit(1.5)  # above the port's timeout: the kit hears nothing back
    retried = late_service.commit(alice, handle, idempotency_key="first")
    assert (retried.status, retried.operation_id) == ("outcome_unknown", first_id)
    proxy.release()  # the first COMMIT lands, then the retry's
    deadline = time.monotonic() + 10
    while len(legacy_engine.committed_batches()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    oldest, repeat = legacy_engine.committed_batches()
    assert oldest["batch_ref"] == repeat["batch_ref"]
    if void_answer_lost:
        proxy.lose_void_reply = True
        assert late_service.reconcile() == [], "postponed: the VOID's outcome is not known"
        assert [b["voided"] for b in legacy_engine.committed_batches()] == [False, True]
        assert late_service.operation_status(alice, operation_id=first_id).status == "outcome_unknown"
        assert late_events(late_service) == []
        proxy.down = False

    [resolution] = late_service.reconcile()

    assert (resolution.status, resolution.finding) == ("succeeded", "committed")
    standing = [b["legacy_batch_id"] for b in legacy_engine.committed_batches() if not b["voided"]]
    assert standing == [oldest["legacy_batch_id"]]
    assert late_service.status(alice, handle).legacy_batch_id == oldest["legacy_batch_id"]
    [found] = late_events(late_service)
    assert found.detail == {
        "finding": "duplicate_voided",
        "batches": 2,
        "voided": [repeat["legacy_batch_id"]],
    }
    assert late_commit_counts(late_service.ctx) == {"duplicate_voided": 1}
