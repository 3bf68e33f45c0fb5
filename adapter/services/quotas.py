"""Quotas and fairness between principals and tenants (the values: :class:`~adapter.domain.quotas.Quotas`).

* **What an import, a principal and a tenant may hold** is checked inside the transaction that would
  add to it (:func:`check_begin`, :func:`check_add`), so a refused call changes nothing. Two calls of
  one tenant racing on the last bytes may both pass: the tenant limit is a bound on growth, not an
  exact ledger.
* **What may run at once** is counted in this process (:class:`Slots`): commits per tenant and in
  all (each holds one legacy session for its whole replay), listen streams and 2025-era sessions per
  principal. A caller over its share is refused at once instead of queueing, so one tenant's slow
  commits cannot take every worker thread and make everyone else wait.
* **How fast one may stage** is metered in this process (:class:`StagingRates`): bytes and records
  a second, per principal and per tenant. An add is admitted while the caller's allowance is not
  used up and charged what it staged once it is accepted (so one call larger than a second's
  allowance still goes through, and the next waits until it is paid off); a refusal says when to try
  again. The HTTP layer meters what a request costs to read the same way (:class:`Allowance`).
* **Deleting a large import's staged records** (abort, expiry) runs in bounded batches of
  ``delete_batch_size`` records, one short transaction each, after the state change: the write lock
  is never held for long, and :func:`discard_leftovers` (run by maintenance) finishes what a crash
  interrupted.
* **What a tenant holds** is kept by the store as a total and the changes since (``store/
  held_bytes.py``), so an add reads it at the same cost however much the tenant holds;
  :func:`fold_held_bytes` (run by maintenance) moves the changes into the total.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from adapter.domain.identity import Principal
from adapter.domain.quotas import QuotaExceeded, Quotas
from adapter.services.context import ServiceContext
from adapter.store import held_bytes
from adapter.store.quota_reads import (
    delete_staged_range,
    imports_with_leftover_records,
)
from adapter.store.unit_of_work import UnitOfWork

__all__ = [
    "Allowance",
    "Slots",
    "StagingRates",
    "check_add",
    "check_begin",
    "check_tenant_bytes",
    "discard_in_batches",
    "discard_leftovers",
    "fold_held_bytes",
]

_GONE_STATES = ("aborted", "expired")
DELETE_BATCH_BYTES = 1024 * 1024


def check_begin(ctx: ServiceContext, open_before: int) -> None:
    """``open_before``: the principal's open, unexpired imports other than the one being opened
    (counted by the statement that inserts it; this refusal rolls that insert back)."""
    limit = ctx.quotas.max_open_imports_per_principal
    if open_before >= limit:
        raise QuotaExceeded(
            f"this principal already has {limit} open imports; commit or abort one first",
            "max_open_imports_per_principal",
            limit,
        )


class Holding(Protocol):
    """What an import holds so far (an ORM row or the add path's ``AddTarget``)."""

    @property
    def record_count(self) -> int: ...

    @property
    def staged_bytes(self) -> int | None: ...


def check_add(ctx: ServiceContext, uow: UnitOfWork, row: Holding, records: int, size: int) -> None:
    quotas = ctx.quotas
    if row.record_count + records > quotas.max_records_per_import:
        raise QuotaExceeded(
            f"the import would hold more than {quotas.max_records_per_import} records",
            "max_records_per_import",
            quotas.max_records_per_import,
        )
    if (row.staged_bytes or 0) + size > quotas.max_import_bytes:
        raise QuotaExceeded(
            f"the import would hold more than {quotas.max_import_bytes} bytes of records",
            "max_import_bytes",
            quotas.max_import_bytes,
        )


def check_tenant_bytes(ctx: ServiceContext, held: int, size: int) -> None:
    """``held`` (what the tenant's imports keep staged, committed ones until the purge) is read by
    the statement that holds the import row, inside the add's transaction: no read of its own before
    it. The add looks its idempotency key up first, so a replay of an add that was accepted is never
    refused by this quota."""
    limit = ctx.quotas.max_staged_bytes_per_tenant
    if held + size > limit:
        raise QuotaExceeded(
            f"the tenant's imports would keep more than {limit} bytes staged (committed ones count "
            "until they are purged)",
            "max_staged_bytes_per_tenant",
            limit,
        )


class Slots:
    """At most ``per_key`` holders per key and ``total`` in all (None: no overall bound), in this process."""

    def __init__(
        self, per_key: int, per_key_setting: str, total: int | None = None, total_setting: str = ""
    ) -> None:
        self.per_key, self.per_key_setting = per_key, per_key_setting
        self.total, self.total_setting = total, total_setting
        self._held: dict[str, int] = {}
        self._all = 0
        self._lock = threading.Lock()

    def take(self, key: str, what: str) -> None:
        """Take one slot for ``key`` or raise QuotaExceeded; every take is paired with a release."""
        with self._lock:
            if self._held.get(key, 0) >= self.per_key:
                raise QuotaExceeded(f"too many {what} at once", self.per_key_setting, self.per_key)
            if self.total is not None and self._all >= self.total:
                raise QuotaExceeded(
                    "every slot of this process is taken; try again shortly", self.total_setting, self.total
                )
            self._held[key] = self._held.get(key, 0) + 1
            self._all += 1

    def release(self, key: str) -> None:
        with self._lock:
            self._all -= 1
            left = self._held[key] - 1
            if left:
                self._held[key] = left
            else:
                del self._held[key]

    @contextmanager
    def hold(self, key: str, what: str) -> Iterator[None]:
        self.take(key, what)
        try:
            yield
        finally:
            self.release(key)

    def held(self, key: str) -> int:
        with self._lock:
            return self._held.get(key, 0)


class Allowance:
    """``rate`` units a second per key, in this process: a token bucket that may go into debt.

    A key may spend while its balance is above zero; what it spends is taken off afterwards, and the
    balance refills at ``rate`` a second up to one second's worth. So a single charge above the rate
    is admitted, and the key then waits until the debt is paid (``wait``). Keys at a full balance are
    forgotten once there are many, so the table stays small.
    """

    MAX_KEYS = 10_000

    def __init__(self, rate: int, setting: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.setting = rate, setting
        self._clock = clock
        self._balance: dict[str, tuple[float, float]] = {}  # key -> (balance, when)
        self._lock = threading.Lock()

    def _current(self, key: str, now: float) -> float:
        balance, then = self._balance.get(key, (float(self.rate), now))
        return min(float(self.rate), balance + max(0.0, now - then) * self.rate)

    def wait(self, key: str) -> float:
        """Seconds until ``key`` may spend again; 0.0 when it may now."""
        with self._lock:
            balance = self._current(key, self._clock())
        return 0.0 if balance > 0 else -balance / self.rate + 1.0 / self.rate

    def charge(self, key: str, amount: int) -> None:
        with self._lock:
            now = self._clock()
            self._balance[key] = (self._current(key, now) - amount, now)
            if len(self._balance) > self.MAX_KEYS:
                self._forget_full(now)

    def _forget_full(self, now: float) -> None:
        full = [k for k in self._balance if self._current(k, now) >= self.rate]
        for key in full:
            del self._balance[key]


class StagingRates:
    """Bytes and records staged a second, per principal and per tenant (one process's share)."""

    def __init__(self, quotas: Quotas, clock: Callable[[], float] = time.monotonic) -> None:
        self._meters = (
            (
                "principal",
                "bytes",
                Allowance(
                    quotas.max_stage_bytes_per_second_per_principal,
                    "max_stage_bytes_per_second_per_principal",
                    clock,
                ),
            ),
            (
                "principal",
                "records",
                Allowance(
                    quotas.max_stage_records_per_second_per_principal,
                    "max_stage_records_per_second_per_principal",
                    clock,
                ),
            ),
            (
                "tenant",
                "bytes",
                Allowance(
                    quotas.max_stage_bytes_per_second_per_tenant,
                    "max_stage_bytes_per_second_per_tenant",
                    clock,
                ),
            ),
            (
                "tenant",
                "records",
                Allowance(
                    quotas.max_stage_records_per_second_per_tenant,
                    "max_stage_records_per_second_per_tenant",
                    clock,
                ),
            ),
        )

    @staticmethod
    def _key(principal: Principal, who: str) -> str:
        return principal.tenant if who == "tenant" else f"{principal.tenant}/{principal.subject}"

    def check(self, principal: Principal) -> None:
        """Raise QuotaExceeded, saying when to try again, while the caller's or its tenant's
        allowance is used up; before the add costs anything."""
        waits = [
            (meter.wait(self._key(principal, who)), who, what, meter) for who, what, meter in self._meters
        ]
        wait, who, what, meter = max(waits, key=lambda item: item[0])
        if wait > 0:
            owner = "this principal" if who == "principal" else "this tenant"
            raise QuotaExceeded(
                f"{owner} stages more {what} a second than it may",
                meter.setting,
                meter.rate,
                retry_after=wait,
            )

    def charge(self, principal: Principal, records: int, size: int) -> None:
        """What an accepted add staged."""
        for who, what, meter in self._meters:
            meter.charge(self._key(principal, who), size if what == "bytes" else records)


class CommitSlot:
    """The legacy session slot of one commit call: taken at the claim, only if the commit starts,
    and given back when the call ends. A repeat answered from the record never takes one, so
    duplicates of a running commit are answered ``in_progress`` even when every slot is taken."""

    def __init__(self, slots: Slots, key: str, what: str) -> None:
        self.slots, self.key, self.what = slots, key, what
        self.taken = False

    def take(self) -> None:
        if not self.taken:  # a claim retried after a write conflict keeps the slot it took
            self.slots.take(self.key, self.what)
            self.taken = True

    def release(self) -> None:
        """Give the slot back (once; nothing happens if it was never taken)."""
        if self.taken:
            self.taken = False
            self.slots.release(self.key)

    def __enter__(self) -> CommitSlot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def discard_in_batches(ctx: ServiceContext, import_id: str, record_count: int, staged_bytes: int = 0) -> int:
    """Delete an import's staged records, at most ``delete_batch_size`` records and about
    ``DELETE_BATCH_BYTES`` of them per transaction (large records make short batches)."""
    average = staged_bytes // record_count if record_count > 0 else 0
    batch = max(1, min(ctx.quotas.delete_batch_size, DELETE_BATCH_BYTES // max(1, average)))
    deleted = 0
    for after in range(0, max(record_count, 0), batch):
        with ctx.store.unit_of_work() as uow:
            deleted += delete_staged_range(uow.session, import_id, after, after + batch)
            uow.commit()
    return deleted


def discard_leftovers(ctx: ServiceContext, *, limit: int = 50) -> int:
    """Finish deletes a crash interrupted: staged records of aborted and expired imports."""
    with ctx.store.reading() as uow:
        found = imports_with_leftover_records(uow.session, _GONE_STATES, limit)
    return sum(discard_in_batches(ctx, import_id, count, size) for import_id, count, size in found)


def fold_held_bytes(ctx: ServiceContext) -> int:
    """Move the tenants' held-bytes changes into their totals (how many tenants' totals moved): the
    add reads a total and the changes not folded yet, so folding keeps that read short. A read
    first, so an idle kit takes no write lock (SQLite) for it."""
    with ctx.store.reading() as uow:
        if not held_bytes.has_changes_to_fold(uow.session):
            return 0
    with ctx.store.unit_of_work() as uow:
        folded = held_bytes.fold_held_bytes(uow.session)
        uow.commit()
    return folded
