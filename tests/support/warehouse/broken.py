"""Warehouse ports that each break one promise of the port contract, the way real ports do.

Every factory takes the settings like ``make_port``; ``check-port`` must fail each with the rule it
breaks (``tests/contract/test_broken_ports.py``):

======================  ==================================================  ==========================
factory                 the lie                                             the rule that catches it
======================  ==================================================  ==========================
``not_findable``        begins every batch under one fixed reference         ``session_commits``
``double_commit``       commits every batch twice (a "mirror" write)        ``session_commits``
``retries_commit``      sends COMMIT again after a lost reply               ``lost_commit_reply_is_unknown``
``stale_status``        answers ``batch_status`` from a cache               ``session_rolls_back``
``hides_outage``        answers "nothing committed" when it cannot ask      ``outage_raises_transient``
``wrong_count``         counts ``add`` calls, not records                   ``session_commits``
``shared_connection``   one connection for every session                    ``concurrent_sessions``
``slow_status``         a status question that takes seconds when empty     ``readiness_is_fast``
``void_not_idempotent`` a second VOID is an error                           ``void_is_idempotent``
======================  ==================================================  ==========================
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from adapter.ports.legacy import (
    BatchStatus,
    CommittedBatch,
    LegacyError,
    LegacyOutcomeUnknown,
    Record,
    VoidResult,
)
from tests.support.warehouse.port import Connection, WarehousePort, WarehouseSession, make_port


class _Port(WarehousePort):
    session = WarehouseSession

    def open_session(self) -> Any:
        return self.session(self)


class _FixedReference(WarehouseSession):
    def begin(self, batch_ref: str, target: str) -> None:
        super().begin("warehouse-import", target)  # the reference the port was written for


class _TwiceCommitted(WarehouseSession):
    def __init__(self, port: WarehousePort) -> None:
        super().__init__(port)
        self._mirror = Connection(port.address, port.timeout)

    def begin(self, batch_ref: str, target: str) -> None:
        super().begin(batch_ref, target)
        self._mirror.ask("begin", ref=batch_ref, target=target)

    def add(self, records: Sequence[Record]) -> None:
        super().add(records)
        self._mirror.ask("add", records=[dict(r) for r in records])

    def commit(self) -> CommittedBatch:
        self._mirror.ask("commit")
        return super().commit()

    def close(self) -> None:
        self._mirror.close()
        super().close()


class _RetriesCommit(WarehouseSession):
    """Keeps the records and replays them on a new connection when COMMIT's reply is lost."""

    def __init__(self, port: WarehousePort) -> None:
        super().__init__(port)
        self._port, self._ref, self._target = port, "", ""
        self._records: list[dict[str, Any]] = []

    def begin(self, batch_ref: str, target: str) -> None:
        super().begin(batch_ref, target)
        self._ref, self._target = batch_ref, target

    def add(self, records: Sequence[Record]) -> None:
        super().add(records)
        self._records += [dict(r) for r in records]

    def commit(self) -> CommittedBatch:
        try:
            return super().commit()
        except LegacyOutcomeUnknown:
            again = Connection(self._port.address, self._port.timeout)
            again.ask("begin", ref=self._ref, target=self._target)
            again.ask("add", records=self._records)
            answer = again.ask("commit")  # the lie: the first COMMIT may have applied
            again.close()
            return CommittedBatch(str(answer["id"]), int(answer["count"]))


class _CountsCalls(WarehouseSession):
    def __init__(self, port: WarehousePort) -> None:
        super().__init__(port)
        self._calls = 0

    def add(self, records: Sequence[Record]) -> None:
        super().add(records)
        self._calls += 1

    def commit(self) -> CommittedBatch:
        batch = super().commit()
        return CommittedBatch(batch.legacy_batch_id, self._calls)


class _SharedSession(WarehouseSession):
    """Every session of the port on its one connection (a lock keeps the lines apart)."""

    def __init__(self, port: WarehousePort) -> None:
        self._connection = port.shared  # type: ignore[attr-defined]
        self._lock: threading.Lock = port.lock  # type: ignore[attr-defined]

    def begin(self, batch_ref: str, target: str) -> None:
        with self._lock:
            super().begin(batch_ref, target)

    def add(self, records: Sequence[Record]) -> None:
        with self._lock:
            super().add(records)

    def commit(self) -> CommittedBatch:
        with self._lock:
            return super().commit()

    def rollback(self) -> None:
        with self._lock:
            super().rollback()

    def close(self) -> None:
        with self._lock:
            self._connection.ask("rollback")  # the shared connection stays open for the next session


def not_findable(settings: Any) -> WarehousePort:
    port = _Port(make_port(settings).address)
    port.session = _FixedReference
    return port


def double_commit(settings: Any) -> WarehousePort:
    port = _Port(make_port(settings).address)
    port.session = _TwiceCommitted
    return port


def retries_commit(settings: Any) -> WarehousePort:
    port = _Port(make_port(settings).address)
    port.session = _RetriesCommit
    return port


def wrong_count(settings: Any) -> WarehousePort:
    port = _Port(make_port(settings).address)
    port.session = _CountsCalls
    return port


def shared_connection(settings: Any) -> WarehousePort:
    port = _Port(make_port(settings).address)
    port.session = _SharedSession
    port.shared = Connection(port.address, port.timeout)  # type: ignore[attr-defined]
    port.lock = threading.Lock()  # type: ignore[attr-defined]
    return port


class _StaleStatus(WarehousePort):
    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address)
        self._cache: dict[str, BatchStatus] = {}

    def batch_status(self, batch_ref: str) -> BatchStatus:
        if batch_ref not in self._cache:
            self._cache[batch_ref] = super().batch_status(batch_ref)
        return self._cache[batch_ref]


class _HidesOutage(WarehousePort):
    def batch_status(self, batch_ref: str) -> BatchStatus:
        try:
            return super().batch_status(batch_ref)
        except LegacyError:
            return BatchStatus(batch_ref, ())  # the lie: "nothing committed" while nobody could ask


class _SlowStatus(WarehousePort):
    def batch_status(self, batch_ref: str) -> BatchStatus:
        found = super().batch_status(batch_ref)
        if not found.batches:
            time.sleep(2.5)  # a reference it has no index for: a full scan
        return found


class _VoidNotIdempotent(WarehousePort):
    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        self.ask("void", id=legacy_batch_id)  # the lie: the warehouse's "already_voided" is a failure
        return VoidResult(legacy_batch_id, already_voided=False)


def stale_status(settings: Any) -> WarehousePort:
    return _StaleStatus(make_port(settings).address)


def hides_outage(settings: Any) -> WarehousePort:
    return _HidesOutage(make_port(settings).address)


def slow_status(settings: Any) -> WarehousePort:
    return _SlowStatus(make_port(settings).address)


def void_not_idempotent(settings: Any) -> WarehousePort:
    return _VoidNotIdempotent(make_port(settings).address)
