"""``add_records``: stage records durably after those already staged, in order; all or nothing.

The hot path of the kit (up to a thousand records a call), so each record is touched as few times as
possible: encoded once (``encode_batch``: the JSON text, its size for the quotas and the digest for
the fingerprint in one pass), checked once against its target's compiled schema, and written by the
driver with the add's operation and events (one statement on PostgreSQL, ``adapter/store/staging.py``).
The rules are those of every other call:

* at most one effect per idempotency key; a repeat with the same records is answered from the record
  of the first (``replayed``), with other records it is ``idempotency_key_reused``;
* only the owner's open, unexpired import takes records; every record must match the target's
  schema (the first that does not is named with its index and field) and the quotas must hold;
* the import's counters, the records, the operation and its events are one transaction: a refusal
  or a lost race leaves nothing behind (a lost race is retried, see ``retry_on_conflict``);
* the staging rates (``rates``, per principal and tenant) are asked first, before the records are
  even encoded, and charged with what was staged once it is: a refused add costs next to nothing,
  and says when to try again. A retried add waits its turn like any other, then gets its replay.

On PostgreSQL a transaction costs two round trips beside its statement (BEGIN, COMMIT), two thirds
of an add's. Where this worker knows the import's target (``ctx.import_targets``: it began the
import, or added to it before) the add is first tried on its own: the records checked against the
target, then one statement outside a transaction that writes the whole add only where every other
rule holds (``_add_alone``). Whatever it does not write (a refusal, a used key, a lost race) takes
the checked transaction, which says why in the usual order, or replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapter.domain.errors import AdapterError, HandleExpired, InvalidState
from adapter.domain.identity import Principal, fingerprint, new_id
from adapter.domain.records import EncodedBatch, encode_batch
from adapter.domain.states import ImportState, OperationKind, OperationState
from adapter.domain.views import AddResult
from adapter.domain.vocabulary import EventKind
from adapter.services.access import handle_digest, require_owner
from adapter.services.context import ServiceContext
from adapter.services.idempotency import Outcome, recorded_outcome, retry_on_conflict, validate_key
from adapter.services.quotas import StagingRates, check_add, check_tenant_bytes
from adapter.store.staging import AddAhead, AddLimits, AddTarget, FinishedOperation, NewRecords
from adapter.store.tables import new_event
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["add_records", "succeeded"]

ADD = OperationKind.ADD.value
OPEN = ImportState.OPEN.value
SUCCEEDED = OperationState.SUCCEEDED.value


def add_records(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    records: Sequence[Any],
    *,
    idempotency_key: str | None = None,
    rates: StagingRates | None = None,
) -> AddResult:
    """Stage ``records`` after those already staged; raises the refusals listed in the module doc."""
    key = validate_key(idempotency_key)
    if rates is not None:
        rates.check(principal)
    batch = encode_batch(records, ctx.limits)
    count = len(batch.texts)
    digest = handle_digest(handle)
    request = fingerprint("add", {"handle": digest, "records": batch.content_digest, "n": count})

    def attempt() -> Outcome:
        ahead = _ahead(principal, key, request, batch.texts)
        alone = _add_alone(ctx, principal, digest, records, batch, ahead)
        if alone is not None:
            return alone
        with ctx.store.unit_of_work() as uow:
            earlier = key and uow.staging.operation_by_key(principal.tenant, principal.subject, ADD, key)
            if earlier:  # a repeat of an add that was accepted: answered from the record
                return recorded_outcome(earlier, request)
            row = _usable_import(ctx, uow, principal, digest, count, batch.size, ahead)
            ctx.targets.require(row.target).check(records, row.record_count)  # every record, before commit
            check_add(ctx, uow, row, count, batch.size)
            check_tenant_bytes(ctx, row.tenant_bytes, batch.size)  # after the key: a replay is never refused
            first_seq = row.record_count + 1
            record_count = row.record_count + count
            result = {"accepted": count, "record_count": record_count, "first_seq": first_seq}
            operation_id = ahead.operation_id
            if not row.written:  # SQLite: the counters, then the operation, its events and the records
                uow.staging.claim(row, record_count, row.staged_bytes + batch.size)
                staged = {"accepted": count, "record_count": record_count}
                effect = (EventKind.IMPORT_RECORDS_STAGED, staged)
                new = NewRecords(row.id, first_seq, batch.texts)
                done = succeeded(principal, ADD, row.id, key, request, result, effect, operation_id)
                uow.staging.record_outcome(done, new)
            uow.commit()
        ctx.import_targets.remember(digest, row.target)
        return Outcome(operation_id, row.id, result, False)

    outcome = retry_on_conflict(attempt)
    if rates is not None and not outcome.replayed:
        rates.charge(principal, count, batch.size)
    return AddResult(
        handle=handle,
        accepted=outcome.result["accepted"],
        record_count=outcome.result["record_count"],
        replayed=outcome.replayed,
    )


def _add_alone(
    ctx: ServiceContext,
    principal: Principal,
    digest: str,
    records: Sequence[Any],
    batch: EncodedBatch,
    ahead: AddAhead,
) -> Outcome | None:
    """PostgreSQL, an import whose target this worker knows: the add as one statement on its own, a
    round trip instead of three. The records are checked against the target first; the statement
    writes only where every other rule holds (the caller's open, unexpired import, the quotas, an
    unused key). None: nothing was written, and the checked path names the refusal in its usual
    order, replays a used key, or learns the target."""
    name = ctx.import_targets.get(digest)
    if name is None or not ctx.store.writes_alone:
        return None
    try:
        target = ctx.targets.require(name)
        target.check(records)
    except AdapterError:  # refused: said by the checked path, after the handle's own checks
        return None
    quotas, count = ctx.quotas, len(batch.texts)
    max_records = quotas.max_records_per_import
    if target.target.max_records is not None:
        max_records = min(max_records, target.target.max_records)
    limits = AddLimits(
        valid_at=ctx.clock(),
        open_state=OPEN,
        max_records=max_records,
        max_bytes=quotas.max_import_bytes,
        max_tenant_bytes=quotas.max_staged_bytes_per_tenant,
    )
    written = ctx.store.add_if_allowed(digest, principal.tenant, count, batch.size, ahead, limits)
    if written is None:
        return None
    import_id, record_count = written
    result = {"accepted": count, "record_count": record_count, "first_seq": record_count - count + 1}
    return Outcome(ahead.operation_id, import_id, result, False)


def _ahead(principal: Principal, key: str | None, request: str, texts: Sequence[str]) -> AddAhead:
    """The add as PostgreSQL writes it with the statement that holds its import: the same operation
    and events as :func:`succeeded` (the counters in the result and the staged event's detail
    are filled in by that statement)."""
    return AddAhead(
        operation_id=new_id(),
        kind=ADD,
        principal=principal.subject,
        key=key,
        fingerprint=request,
        status=SUCCEEDED,
        staged_event=(EventKind.IMPORT_RECORDS_STAGED.value, OPEN),
        done_event=(EventKind.OPERATION_SUCCEEDED.value, SUCCEEDED, {"kind": ADD}),
        texts=texts,
    )


def _usable_import(
    ctx: ServiceContext,
    uow: UnitOfWork,
    principal: Principal,
    digest: str,
    records: int,
    size: int,
    ahead: AddAhead,
) -> AddTarget:
    """The caller's open import, held for the change: the same refusals as ``find_usable_import``.

    On PostgreSQL the store has already moved its counters by ``records`` and ``size`` and written
    ``ahead`` (one statement instead of a locking read, an update and the add's own writes); every
    refusal raised here or later rolls all of it back."""
    found = uow.staging.hold_for_add(digest, principal.tenant, records, size, ahead)
    row = require_owner(principal, found)
    state = ImportState(row.state)
    if state is ImportState.EXPIRED or (state is ImportState.OPEN and ctx.clock() >= row.expires_at):
        raise HandleExpired()
    if state is not ImportState.OPEN:
        raise InvalidState(f"records can only be added to an open import; this one is {row.state}")
    return row


def succeeded(
    principal: Principal,
    kind: str,
    import_id: str,
    key: str | None,
    request: str,
    result: dict[str, Any],
    effect: tuple[EventKind, dict[str, Any]],
    operation_id: str | None = None,
) -> FinishedOperation:
    """A call that took effect at once (begin, add, replace), as it is written with its effect (in
    the effect's transaction, or by the statement that writes both on PostgreSQL): its finished
    operation, which answers a repeat of ``key`` from ``result``, with the effect's event (the import
    stays open) and ``operation.succeeded``; ``operation_id``, or a new one."""
    operation_id = operation_id or new_id()
    effect_kind, detail = effect
    return FinishedOperation(
        id=operation_id,
        kind=kind,
        principal=principal.subject,
        tenant=principal.tenant,
        import_id=import_id,
        key=key,
        fingerprint=request,
        status=SUCCEEDED,
        result=result,
        events=[
            new_event(effect_kind, import_id, operation_id, OPEN, detail),
            new_event(EventKind.OPERATION_SUCCEEDED, import_id, operation_id, SUCCEEDED, {"kind": kind}),
        ],
    )
