"""``replace_records``: repair an import by putting new records in place of staged ones, by position.

A record the legacy system refused (its ``Refusal`` names the position, counted from 0 as in every
message of the kit) can be corrected without starting the import over. The rules are those of
``add_records`` (the owner's open, unexpired import; every record encoded and checked against its
target's schema once; the quotas; at most one effect per idempotency key) plus one of the
confirmation: a replacement keeps the record count, so it moves the import's ``revision``, which a
commit confirmation names; an answer to a question asked before the replacement never commits what
it did not show (``commit/confirmation.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapter.domain.errors import InvalidRequest, InvalidState
from adapter.domain.identity import Principal, fingerprint
from adapter.domain.records import encode_batch
from adapter.domain.states import ImportState, OperationKind
from adapter.domain.views import ReplaceResult
from adapter.domain.vocabulary import EventKind
from adapter.services.access import find_usable_import
from adapter.services.context import ServiceContext
from adapter.services.idempotency import Outcome, recorded_outcome, retry_on_conflict, validate_key
from adapter.services.quotas import StagingRates, check_add, check_tenant_bytes
from adapter.services.staging import succeeded
from adapter.services.targets import RecordInvalid
from adapter.store.held_bytes import tenant_held_bytes

__all__ = ["replace_records"]

REPLACE = OperationKind.REPLACE.value


def replace_records(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    replacements: Sequence[tuple[int, Any]],
    *,
    idempotency_key: str | None = None,
    rates: StagingRates | None = None,
) -> ReplaceResult:
    """Replace the staged record at each ``(position, record)``; all or nothing. A replacement is
    staging: ``rates`` are asked first and charged for what it wrote, as an add's are.

    Raises HandleNotFound, HandleExpired, InvalidState (not open), InvalidRequest (a position twice,
    or not staged), RecordInvalid, LimitExceeded, QuotaExceeded, IdempotencyKeyReused.
    """
    if rates is not None:
        rates.check(principal)
    key = validate_key(idempotency_key)
    positions = [position for position, _ in replacements]
    if any(type(p) is not int or p < 0 for p in positions):
        raise InvalidRequest("positions are whole numbers from 0")
    if len(set(positions)) != len(positions):
        raise InvalidRequest("a position may be replaced once per call")
    records = [record for _, record in replacements]
    batch = encode_batch(records, ctx.limits, positions)
    request = fingerprint(
        "replace", {"handle": ctx.codec.digest(handle), "records": batch.content_digest, "at": positions}
    )

    def attempt() -> Outcome:
        with ctx.store.unit_of_work() as uow:
            earlier = key and uow.operations.by_key(principal.tenant, principal.subject, REPLACE, key)
            if earlier:
                return recorded_outcome(earlier, request)
            row = find_usable_import(uow, principal, handle, ctx.clock())
            if row.state != ImportState.OPEN.value:
                raise InvalidState(f"records can only be replaced in an open import; this one is {row.state}")
            beyond = [p for p in positions if p >= row.record_count]
            if beyond:
                raise InvalidRequest(
                    f"no staged record at position {beyond[0]} (the import holds {row.record_count})"
                )
            _check_schema(ctx, row.target, records, positions, row.record_count)
            seqs = [p + 1 for p in positions]  # staged records are numbered from 1
            old = uow.records.sizes(row.id, seqs)
            growth = batch.size - sum(old.values())
            if growth > 0:
                check_add(ctx, uow, row, 0, growth)
                check_tenant_bytes(ctx, tenant_held_bytes(uow.session, row.tenant), growth)
            uow.records.replace(row.id, dict(zip(seqs, batch.texts, strict=True)))
            row.staged_bytes = (row.staged_bytes or 0) + growth
            row.revision += 1
            result = {"replaced": len(positions), "record_count": row.record_count, "revision": row.revision}
            effect = (
                EventKind.IMPORT_RECORDS_REPLACED,
                {"replaced": len(positions), "revision": row.revision},
            )
            operation = succeeded(principal, REPLACE, row.id, key, request, result, effect)
            uow.staging.record_outcome(operation)
            uow.commit()
            return Outcome(operation.id, row.id, result, False)

    outcome = retry_on_conflict(attempt)
    if rates is not None and not outcome.replayed:
        rates.charge(principal, len(positions), batch.size)
    return ReplaceResult(
        handle=handle,
        replaced=outcome.result["replaced"],
        record_count=outcome.result["record_count"],
        replayed=outcome.replayed,
    )


def _check_schema(
    ctx: ServiceContext, target: str, records: list[Any], positions: list[int], staged: int
) -> None:
    """Every record against its target's schema, named by the position it replaces."""
    try:
        ctx.targets.require(target).check(records, staged - len(records))
    except RecordInvalid as invalid:
        raise RecordInvalid(positions[invalid.index], invalid.field, invalid.rule) from None
