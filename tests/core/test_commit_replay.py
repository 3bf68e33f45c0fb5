"""The commit's replay: records go to the port as stored JSON texts where the session takes them
(``add_json``), decoded through ``add`` where it does not, and the count is checked either way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import delete, func, insert, select, update

from adapter.domain.identity import Principal
from adapter.legacy.forwarding import ForwardingPort, ForwardingSession
from adapter.legacy.instrumented import InstrumentedPort
from adapter.ports.legacy import LegacyPort, LegacySession, Record
from adapter.services import CommitPolicy, ImportService, ServiceContext
from adapter.store.tables import StagedChunkRow
from legacy_sim.engine import LegacyEngine
from tests.support.imports import staged

RECORDS = [{"id": i, "name": f"customer {i}", "vip": i % 3 == 0, "score": i / 4} for i in range(57)]


class _PlainSession:
    """A session with exactly the protocol's methods (no ``add_json``), as a user's port may be."""

    def __init__(self, inner: LegacySession, seen: list[Any]) -> None:
        self._inner = inner
        self._seen = seen

    def add(self, records: Sequence[Record]) -> None:
        self._seen.extend(records)
        self._inner.add(records)

    def __getattr__(self, name: str) -> Any:  # begin, commit, rollback, close; never add_json
        if name == "add_json":
            raise AttributeError(name)
        return getattr(self._inner, name)


class _PlainPort(ForwardingPort):
    def __init__(self, inner: LegacyPort) -> None:
        super().__init__(inner)
        self.seen: list[Any] = []

    def open_session(self) -> LegacySession:
        return _PlainSession(self._inner.open_session(), self.seen)  # type: ignore[return-value]


class _CountingSession(ForwardingSession):
    """Hooks ``add_json`` only: counts the texts and passes them on."""

    texts = 0
    adds = 0

    def add_json(self, texts: Sequence[str]) -> None:
        type(self).texts += len(texts)
        super().add_json(texts)


class _HookingSession(ForwardingSession):
    """Hooks ``add``, as a fault injector would: it must still see every record."""

    seen: list[Any] = []

    def add(self, records: Sequence[Record]) -> None:
        type(self).seen.extend(records)
        super().add(records)


def _port(session_class: type[ForwardingSession], inner: LegacyPort) -> ForwardingPort:
    class Port(ForwardingPort):
        def open_session(self) -> LegacySession:
            return session_class(self._inner.open_session())

    return Port(inner)


@pytest.fixture
def small_chunks(ctx: ServiceContext) -> ServiceContext:
    ctx.commit_policy = CommitPolicy(chunk_size=10, retry_wait_initial=0.001, retry_wait_max=0.01)
    return ctx


def test_a_session_without_add_json_gets_the_records_decoded(
    small_chunks: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    port = _PlainPort(small_chunks.legacy)
    small_chunks.legacy = port
    service = ImportService(small_chunks)
    handle = staged(service, alice, RECORDS)

    result = service.commit(alice, handle)

    assert result.status == "committed"
    assert port.seen == RECORDS and all(type(record) is dict for record in port.seen)
    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == RECORDS


def test_the_simulator_session_gets_the_stored_texts(
    small_chunks: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    _CountingSession.texts = 0
    small_chunks.legacy = InstrumentedPort(_port(_CountingSession, small_chunks.legacy))
    calls: list[tuple[str, str]] = []
    small_chunks.legacy.add_observer(lambda command, _s, outcome: calls.append((command, outcome)))
    service = ImportService(small_chunks)
    handle = staged(service, alice, RECORDS)

    assert service.commit(alice, handle).status == "committed"

    assert _CountingSession.texts == len(RECORDS)
    # 57 records in chunks of 10, timed as "add": the first chunk goes in three pieces (1 record, to
    # learn how fast the system is, then 8: eight times as many at most, then the last one), every
    # later chunk whole.
    assert calls.count(("add", "ok")) == 8
    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == RECORDS


def test_a_wrapper_that_hooks_add_still_sees_every_record(
    small_chunks: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    _HookingSession.seen = []
    small_chunks.legacy = _port(_HookingSession, small_chunks.legacy)
    service = ImportService(small_chunks)
    handle = staged(service, alice, RECORDS)

    assert service.commit(alice, handle).status == "committed"

    assert _HookingSession.seen == RECORDS
    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == RECORDS


@pytest.mark.parametrize("change", ["extra", "missing", "gap", "overlap"])
@pytest.mark.parametrize("chunk_size", [10, 57, 500])
def test_a_store_holding_other_than_the_counted_records_is_never_committed(
    ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine, change: str, chunk_size: int
) -> None:
    ctx.commit_policy = CommitPolicy(chunk_size=chunk_size, retry_wait_initial=0.001, retry_wait_max=0.01)
    service = ImportService(ctx)
    handle = staged(service, alice, RECORDS, chunk=20)  # chunks 1-20, 21-40, 41-57
    import_id = service.status(alice, handle).import_id
    chunks = StagedChunkRow
    with ctx.store.unit_of_work() as uow:  # changed behind the kit's back
        if change == "extra":  # a record far past the count
            stray = {"import_id": import_id, "first_seq": 10_000, "last_seq": 10_000, "data": '{"id":-1}'}
            uow.session.execute(insert(chunks).values(stray))
        elif change == "missing":  # the last record
            last = uow.session.scalar(select(func.max(chunks.last_seq)))
            data = uow.session.scalar(select(chunks.data).where(chunks.last_seq == last))
            uow.session.execute(
                update(chunks)
                .where(chunks.last_seq == last)
                .values(last_seq=last - 1, data=data.rsplit("\n", 1)[0])
            )
        elif change == "gap":  # the middle chunk
            uow.session.execute(delete(chunks).where(chunks.last_seq == 40))
        else:  # the middle chunk claims a position of the first too
            uow.session.execute(update(chunks).where(chunks.last_seq == 40).values(first_seq=20))
        uow.commit()

    result = service.commit(alice, handle)

    assert result.status == "failed"
    assert legacy_engine.committed_batches() == []


def test_the_first_attempt_point_is_written_by_the_claim_and_a_retry_writes_its_own(
    ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    service = ImportService(ctx)
    handle = staged(service, alice, RECORDS)
    result = service.commit(alice, handle)
    operation = service.operation_status(alice, operation_id=result.operation_id)
    points = [
        (e.detail["point"], e.detail["attempt"])
        for e in operation.history
        if e.event == "operation.recovery_point"
    ]
    assert operation.attempts == 1
    assert points == [("replaying", 1), ("commit_sent", 1)]

    ctx.commit_policy = CommitPolicy(
        chunk_size=10, max_attempts=30, retry_wait_initial=0.001, retry_wait_max=0.005
    )
    handle = staged(service, alice, RECORDS[:20])
    legacy_engine.update_faults(error_rate=0.05, seed=7)
    result = service.commit(alice, handle)
    legacy_engine.update_faults(error_rate=0.0)
    assert result.status == "committed"
    operation = service.operation_status(alice, operation_id=result.operation_id)
    replaying = [
        e.detail["attempt"] for e in operation.history if e.detail and e.detail.get("point") == "replaying"
    ]
    assert operation.attempts > 1 and replaying == list(range(1, operation.attempts + 1))
