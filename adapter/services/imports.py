"""The import use cases that need one transaction each: begin, add, status.

Add (the hot path) is in ``staging.py``; commit (the long, multi-step one) in ``commit.py``; abort
and compensation in ``abort.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from adapter.domain.confirmation import valid_target
from adapter.domain.errors import HandleNotFound, InvalidRequest
from adapter.domain.identity import Principal, fingerprint, new_id
from adapter.domain.states import ImportState, OperationKind
from adapter.domain.text import require_storable
from adapter.domain.views import BeginResult, ImportView, OperationSummary
from adapter.domain.vocabulary import EventKind
from adapter.services.access import effective_state, handle_digest, require_owner
from adapter.services.context import ServiceContext
from adapter.services.idempotency import Outcome, recorded_outcome, retry_on_conflict, validate_key
from adapter.services.quotas import check_begin
from adapter.services.staging import add_records, succeeded
from adapter.store.reads import ImportWithOperations
from adapter.store.staging import NewImport

__all__ = ["add_records", "begin_import", "import_status", "import_status_async"]

BEGIN = OperationKind.BEGIN.value
OPEN = ImportState.OPEN.value


def _validate_begin(ctx: ServiceContext, target: str, ttl_seconds: int | None) -> int:
    limits = ctx.limits
    if not isinstance(target, str) or not target.strip() or len(target) > limits.max_target_length:
        raise InvalidRequest(f"target must be a non-empty string of at most {limits.max_target_length} chars")
    require_storable(target=target)
    if not valid_target(target):  # it is shown to people in the commit confirmation: an identifier only
        raise InvalidRequest(
            "target must be an identifier: ASCII letters and digits, then also _ . : / - (no spaces)"
        )
    ttl = ctx.default_ttl_seconds if ttl_seconds is None else ttl_seconds
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, int)
        or not limits.min_ttl_seconds <= ttl <= limits.max_ttl_seconds
    ):
        raise InvalidRequest(
            f"ttl_seconds must be an integer from {limits.min_ttl_seconds} to {limits.max_ttl_seconds}"
        )
    return ttl


def begin_import(
    ctx: ServiceContext,
    principal: Principal,
    target: str,
    *,
    idempotency_key: str | None = None,
    ttl_seconds: int | None = None,
) -> BeginResult:
    """Open an import and return its handle: opaque, bound to the caller, valid for ``ttl_seconds``.

    Like an add, on prebuilt statements (``store/staging.py``): the import, then its operation
    already finished with its events. On PostgreSQL the begin is first tried as one statement on its
    own, written only where the principal's open imports are under their quota and the key is unused
    (a round trip instead of four); whatever it does not write takes the checked transaction, which
    refuses or replays."""
    key = validate_key(idempotency_key)
    ttl = _validate_begin(ctx, target, ttl_seconds)
    ctx.targets.require(target)  # an unknown target is refused before anything is stored
    request = fingerprint("begin", {"target": target, "ttl": ttl})

    def attempt() -> Outcome:
        now = ctx.clock()
        import_id = new_id()
        new = NewImport(
            id=import_id,
            handle_digest=ctx.codec.digest(ctx.codec.handle_for(import_id)),
            principal=principal.subject,
            tenant=principal.tenant,
            target=target,
            state=OPEN,
            expires_at=now + timedelta(seconds=ttl),
        )
        result = {"import_id": import_id, "target": target, "expires_at": new.expires_at.isoformat()}
        effect = (EventKind.IMPORT_OPENED, {"ttl_seconds": ttl})
        operation = succeeded(principal, BEGIN, import_id, key, request, result, effect)
        limit = ctx.quotas.max_open_imports_per_principal
        if not (ctx.store.writes_alone and ctx.store.begin_if_allowed(new, operation, limit, now)):
            with ctx.store.unit_of_work() as uow:
                staging = uow.staging
                earlier = key and staging.operation_by_key(principal.tenant, principal.subject, BEGIN, key)
                if earlier:  # a repeat of a begin that was accepted: answered from the record
                    return recorded_outcome(earlier, request)
                check_begin(ctx, staging.open_import(new, now))  # a refusal rolls the insert back
                staging.record_outcome(operation)
                uow.commit()
        ctx.import_targets.remember(new.handle_digest, target)  # its adds can check records first
        return Outcome(operation.id, import_id, result, False)

    outcome = retry_on_conflict(attempt)
    return BeginResult(
        handle=ctx.codec.handle_for(outcome.result["import_id"]),
        import_id=outcome.result["import_id"],
        status=ImportState.OPEN.value,
        target=outcome.result["target"],
        expires_at=datetime.fromisoformat(outcome.result["expires_at"]),
        record_count=0,
        replayed=outcome.replayed,
    )


def import_status(ctx: ServiceContext, principal: Principal, handle: str) -> ImportView:
    """The import's current state; an open import past its expiry shows as expired."""
    found = ctx.store.import_with_operations(handle_digest(handle))  # one prepared statement
    return _status_view(ctx, principal, handle, found)


async def import_status_async(ctx: ServiceContext, principal: Principal, handle: str) -> ImportView:
    """``import_status`` for a caller on an event loop: the hot path, polled by hosts, reads without
    a worker-thread hop where the store can (see ``store/reads.py``)."""
    found = await ctx.store.import_with_operations_async(handle_digest(handle))
    return _status_view(ctx, principal, handle, found)


def _status_view(
    ctx: ServiceContext, principal: Principal, handle: str, found: ImportWithOperations | None
) -> ImportView:
    if found is None:
        raise HandleNotFound()
    row = require_owner(principal, found.row)
    return to_view(row, handle, ctx, found.operations, earlier_operations=found.earlier)


def to_view(
    row: Any,
    handle: str,
    ctx: ServiceContext,
    operations: Sequence[OperationSummary],
    *,
    earlier_operations: bool = False,
) -> ImportView:
    """Build the view from an ORM row or a Core row (both have the columns as attributes)."""
    return ImportView(
        handle=handle,
        import_id=row.id,
        status=effective_state(row, ctx.clock()).value,
        target=row.target,
        record_count=row.record_count,
        expires_at=row.expires_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
        legacy_batch_id=row.legacy_batch_id,
        operations=tuple(operations),
        earlier_operations=earlier_operations,
    )
