"""The rules of confirming a commit, independent of how the question reaches a person.

Any transport that asks (MRTR form elicitation today, an in-session elicitation for older clients)
uses the same three steps:

1. :func:`commit_subject`: what the question describes, read from the store (never from the
   caller): the import, its target and its record count; ``None`` when there is nothing to confirm.
2. :func:`record_decision`: the first answer to a round is stored durably, so a round is answered
   once across every worker: a replay with the same answer gets the same outcome (an accepted
   final round delivered twice still commits once, through its idempotency key), a replay with a
   different answer is refused with ``confirmation_used``.
3. The commit itself is passed the subject (``commit_import(..., expect=subject)``), and its claim
   refuses with ``confirmation_stale`` if the import no longer matches, in the same transaction
   that would start the commit: nothing the person did not see is ever committed.
"""

from __future__ import annotations

import secrets
from enum import StrEnum

from adapter.domain.confirmation import CommitSubject
from adapter.domain.errors import ConfirmationUsed, HandleNotFound
from adapter.domain.identity import Principal
from adapter.domain.states import ImportState
from adapter.services.access import effective_state, find_import
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict
from adapter.store.tables import ConfirmationRoundRow

__all__ = ["Decision", "commit_subject", "mark_stale", "new_round_id", "record_decision"]


class Decision(StrEnum):
    ACCEPTED = "accepted"
    DECLINED = "declined"  # decline, cancel, or confirm=false
    MISSING = "missing"  # no usable answer: the question is asked again
    STALE = "stale"  # accepted, but the import had changed: asked again with the new numbers


def new_round_id() -> str:
    return secrets.token_hex(16)


def commit_subject(ctx: ServiceContext, principal: Principal, handle: str) -> CommitSubject | None:
    """What a confirmation would describe now; None unless the import is open with records.

    Raises HandleNotFound. An import that cannot be committed gets no question: the commit
    itself then says why (expired, aborted, already committed, empty).
    """
    with ctx.store.unit_of_work() as uow:
        row = find_import(uow, principal, handle)
        if effective_state(row, ctx.clock()) is not ImportState.OPEN or row.record_count == 0:
            return None
        return CommitSubject(row.id, row.target, row.record_count)


def record_decision(
    ctx: ServiceContext, principal: Principal, round_id: str, subject: CommitSubject, decision: Decision
) -> Decision:
    """Store the first answer of a round; return the answer the round holds.

    Raises ConfirmationUsed when the round was answered otherwise before (or belongs to someone
    else: the sealed state binds the principal too, this is the store's own check). ``STALE`` is
    recorded over an ``ACCEPTED`` by :func:`mark_stale` only.
    """

    def step() -> Decision:
        with ctx.store.unit_of_work() as uow:
            existing = uow.confirmations.get(round_id)
            if existing is not None:
                return _same_answer(existing, principal, subject, decision)
            uow.confirmations.add(
                ConfirmationRoundRow(
                    round_id=round_id,
                    principal=principal.subject,
                    tenant=principal.tenant,
                    import_id=subject.import_id,
                    decision=decision.value,
                )
            )
            uow.commit()  # another worker recording this round first: StoreConflict, and the retry reads it
            return decision

    return retry_on_conflict(step)


def _same_answer(
    existing: ConfirmationRoundRow, principal: Principal, subject: CommitSubject, decision: Decision
) -> Decision:
    if (existing.principal, existing.tenant, existing.import_id) != (
        principal.subject,
        principal.tenant,
        subject.import_id,
    ):
        raise HandleNotFound()
    held = Decision(existing.decision)
    if held is Decision.STALE and decision is Decision.ACCEPTED:
        return held  # the transport asks again with the new numbers, as the first time
    if held is not decision:
        raise ConfirmationUsed()
    return held


def mark_stale(ctx: ServiceContext, round_id: str) -> None:
    """An accepted round whose import changed before the commit started: it never commits."""
    with ctx.store.unit_of_work() as uow:
        existing = uow.confirmations.get(round_id)
        if existing is not None and existing.decision == Decision.ACCEPTED.value:
            existing.decision = Decision.STALE.value
            uow.commit()
