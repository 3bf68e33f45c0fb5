"""Quotas and fairness between principals and tenants (the values: :class:`~adapter.domain.quotas.Quotas`).

* **What an import, a principal and a tenant may hold** is checked inside the transaction that would
  add to it (:func:`check_begin`, :func:`check_add`), so a refused call changes nothing. Two calls of
  one tenant racing on the last bytes may both pass: the tenant limit is a bound on growth, not an
  exact ledger.
* **What may run at once** is counted in this process (:class:`Slots`): commits per tenant and in
  all (each holds one legacy session for its whole replay), listen streams per principal. A caller
  over its share is refused at once instead of queueing, so one tenant's slow commits cannot take
  every worker thread and make everyone else wait.
* **Deleting a large import's staged records** (abort, expiry) runs in bounded batches of
  ``delete_batch_size`` records, one short transaction each, after the state change: the write lock
  is never held for long, and :func:`discard_leftovers` (run by maintenance) finishes what a crash
  interrupted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from adapter.domain.quotas import QuotaExceeded
from adapter.services.context import ServiceContext
from adapter.store.quota_reads import (
    delete_staged_range,
    imports_with_leftover_records,
)
from adapter.store.unit_of_work import UnitOfWork

__all__ = [
    "Slots",
    "check_add",
    "check_begin",
    "check_tenant_bytes",
    "discard_in_batches",
    "discard_leftovers",
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
    """``held`` (what the tenant's open and committing imports hold) is read by the statement that
    holds the import row, inside the add's transaction: no read of its own before it. The add looks
    its idempotency key up first, so a replay of an add that was accepted is never refused."""
    limit = ctx.quotas.max_staged_bytes_per_tenant
    if held + size > limit:
        raise QuotaExceeded(
            f"the tenant's uncommitted imports would hold more than {limit} bytes",
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
    with ctx.store.unit_of_work() as uow:
        found = imports_with_leftover_records(uow.session, _GONE_STATES, limit)
    return sum(discard_in_batches(ctx, import_id, count, size) for import_id, count, size in found)
