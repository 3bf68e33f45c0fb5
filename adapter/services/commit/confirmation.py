"""The commit conversation: confirming a commit (or the void of an abort), whatever carries the
question to a person.

Both protocol eras and the Tasks path drive the same state machine, :class:`Conversation`; a
transport only carries its questions and answers (``entrypoints/mcp/confirm.py``):

* ``start()`` -> :class:`Ask` (a new round: what to ask, sealed by the transport) or
  :class:`Proceed` (nobody is to be asked: go ahead);
* ``answer(round, decision)`` -> :class:`Proceed` (accepted), :class:`Declined`, or :class:`Ask`
  again (no usable answer), until ``max_rounds`` questions were asked;
* ``stale(round, error)`` when the act of an accepted round found the import changed -> a new
  :class:`Ask` with today's numbers, or the error after the last round.

Two acts are confirmed this way (``purpose``): a commit (``CommitSubject``: what lands), and an
abort that may void a batch that landed (``VoidSubject``: the batch, or a commit still running whose
batch would be voided if it lands). Dropping the staged records of an open import asks nothing.

The rules, one place for all transports:

1. **What is asked is what may be done.** :func:`commit_subject` / :func:`void_subject` read the
   subject from the store (never from the caller): the import, its target and its record count (and
   the batch to void); ``None`` when there is nothing to confirm. An accepted round acts with
   ``expect=<subject>``, and the commit's claim (or the abort's transaction) refuses with
   ``confirmation_stale`` if the import no longer matches, in the transaction that would act: nothing
   the person did not see is ever committed or voided.
2. **A round is answered once.** :func:`record_decision` stores the first answer of a round
   durably, so a replay with the same answer gets the same outcome on any worker (an accepted final
   round delivered twice commits once: its key is ``confirmed:<round id>`` unless the caller gave
   one), and a replay with another answer is refused with ``confirmation_used``.
3. **A confirmation has a lifetime**, ``max_seconds`` from its first round, on the kit's clock
   (``ServiceContext.clock``), whatever the transport's own seal says.
4. **Who is asked** (``ConfirmationRules.should_ask`` in ``domain/confirmation.py``): ``never``
   nobody; ``when-supported`` a client that can show a form; ``always`` such a client, and any
   other is refused (``FormRequired``) before anything changes.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from adapter.domain.confirmation import (
    NOTHING_CONFIRMED,
    CommitSubject,
    ConfirmationRules,
    FormRequired,
    Subject,
    VoidSubject,
    subject_from_state,
)
from adapter.domain.errors import ConfirmationStale, ConfirmationUsed, HandleNotFound, InvalidRequest
from adapter.domain.identity import Principal
from adapter.domain.states import ImportState
from adapter.services.access import effective_state, find_import
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict
from adapter.store.tables import ConfirmationRoundRow, ImportRow

__all__ = [
    "Ask",
    "ConfirmationMissing",
    "ConfirmationRules",
    "Conversation",
    "Decision",
    "Declined",
    "FormRequired",
    "Proceed",
    "Purpose",
    "Round",
    "commit_subject",
    "mark_stale",
    "new_round_id",
    "record_decision",
    "void_subject",
    "void_subject_of",
]


class Decision(StrEnum):
    ACCEPTED = "accepted"
    DECLINED = "declined"  # decline, cancel, or confirm=false
    MISSING = "missing"  # no usable answer: the question is asked again
    STALE = "stale"  # accepted, but the import had changed: asked again with the new numbers


def new_round_id() -> str:
    return secrets.token_hex(16)


class ConfirmationMissing(InvalidRequest):
    def __init__(self) -> None:
        super().__init__("the confirmation was not answered; call commit_import again")


class ConfirmationExpired(InvalidRequest):
    def __init__(self) -> None:
        super().__init__("the confirmation took too long; call commit_import again")


@dataclass(frozen=True, slots=True)
class Round:
    """One question: its id (answered once), its number, when the first round was asked, and the
    subject it showed. The transport seals it (``requestState``) or keeps it for the request."""

    round_id: str
    number: int
    started: datetime
    subject: Subject

    def to_state(self) -> dict[str, Any]:
        return {
            "round_id": self.round_id,
            "round": self.number,
            "started": self.started.timestamp(),
            "subject": self.subject.to_state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Round:
        """Raises KeyError, TypeError or ValueError for a state that does not hold a round."""
        number = state["round"]
        if type(number) is not int:
            raise TypeError("not a round number")
        started = datetime.fromtimestamp(float(state["started"]), UTC)
        return cls(str(state["round_id"]), number, started, subject_from_state(state["subject"]))


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask this round's question (``question_text(round.subject)``)."""

    round: Round


@dataclass(frozen=True, slots=True)
class Proceed:
    """Act now: with ``key``, only if the import still is ``expect`` (None: nobody was asked;
    ``NOTHING_CONFIRMED``: a question was due but there was nothing to ask about, so a commit may
    only answer from the record or refuse, and an abort only do what needs no question)."""

    key: str | None
    expect: Subject | None
    round: Round | None = None


@dataclass(frozen=True, slots=True)
class Declined:
    record_count: int


Step = Ask | Proceed | Declined
Purpose = Literal["commit", "void"]


class Conversation:
    """The confirmation of one ``commit_import``, step by step (see the module docstring)."""

    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx
        self.rules: ConfirmationRules = ctx.confirmation

    def start(
        self, principal: Principal, handle: str, *, key: str | None, ask: bool, purpose: Purpose = "commit"
    ) -> Ask | Proceed:
        """The first step of a commit (or abort) request. Raises HandleNotFound."""
        if not ask:
            return Proceed(key, None)
        subject = self._subject(purpose, principal, handle)
        if subject is None:  # nothing to ask about: the act explains why not, or answers a replay
            return Proceed(key, NOTHING_CONFIRMED)
        return Ask(self._round(1, None, subject))

    def answer(
        self, principal: Principal, handle: str, round_: Round, decision: Decision, *, key: str | None
    ) -> Step:
        """What an answer to ``round_`` leads to. Raises ConfirmationExpired, ConfirmationMissing,
        ConfirmationStale, ConfirmationUsed, HandleNotFound."""
        if self._ctx.clock() - round_.started > timedelta(seconds=self.rules.max_seconds):
            raise ConfirmationExpired()
        held = record_decision(self._ctx, principal, round_.round_id, round_.subject, decision)
        if held is Decision.DECLINED:
            return Declined(round_.subject.record_count)
        if held is Decision.ACCEPTED:
            # A final round delivered twice must commit once, so it carries a key of its own.
            return Proceed(key or f"confirmed:{round_.round_id}", round_.subject, round_)
        # Missing (no usable answer), or an accepted round that went stale: ask again, with today's numbers.
        if round_.number >= self.rules.max_rounds:
            raise ConfirmationMissing()
        current = self._subject(_purpose_of(round_.subject), principal, handle)
        if current is None:
            raise ConfirmationStale(None)
        return Ask(self._round(round_.number + 1, round_.started, current))

    def stale(self, round_: Round | None, error: ConfirmationStale) -> Ask:
        """The commit of ``round_`` (None: of a commit nobody was asked about) found the import
        changed: ask again with today's numbers, or raise ``error`` after the last round."""
        if round_ is not None:
            mark_stale(self._ctx, round_.round_id)
        current = error.current if isinstance(error.current, CommitSubject | VoidSubject) else None
        asked = round_.number if round_ is not None else 0
        if current is None or asked >= self.rules.max_rounds:
            raise error
        return Ask(self._round(asked + 1, round_.started if round_ is not None else None, current))

    def _round(self, number: int, started: datetime | None, subject: Subject) -> Round:
        return Round(new_round_id(), number, started or self._ctx.clock(), subject)

    def _subject(self, purpose: Purpose, principal: Principal, handle: str) -> Subject | None:
        if purpose == "void":
            return void_subject(self._ctx, principal, handle)
        return commit_subject(self._ctx, principal, handle)


def _purpose_of(subject: Subject) -> Purpose:
    return "void" if isinstance(subject, VoidSubject) else "commit"


def commit_subject(ctx: ServiceContext, principal: Principal, handle: str) -> CommitSubject | None:
    """What a confirmation would describe now; None unless the import is open with records.

    Raises HandleNotFound. An import that cannot be committed gets no question: the commit
    itself then says why (expired, aborted, already committed, empty).
    """
    with ctx.store.reading() as uow:
        row = find_import(uow, principal, handle)
        if effective_state(row, ctx.clock()) is not ImportState.OPEN or row.record_count == 0:
            return None
        return CommitSubject(row.id, row.target, row.record_count, row.revision)


def void_subject(ctx: ServiceContext, principal: Principal, handle: str) -> VoidSubject | None:
    """What a void confirmation would describe now; None unless aborting may void a batch.

    Raises HandleNotFound."""
    with ctx.store.reading() as uow:
        return void_subject_of(find_import(uow, principal, handle))


def void_subject_of(row: ImportRow) -> VoidSubject | None:
    """A committed import: its batch. A commit still running or unknown: a batch that may land. Any
    other import: nothing an abort could void (an open one's staged records are dropped unasked, a
    compensating one's VOID was confirmed when it started)."""
    if row.state == ImportState.COMMITTED:
        return VoidSubject(row.id, row.target, row.record_count, row.legacy_batch_id)
    if row.state in (ImportState.COMMITTING, ImportState.OUTCOME_UNKNOWN):
        return VoidSubject(row.id, row.target, row.record_count, None)
    return None


def record_decision(
    ctx: ServiceContext, principal: Principal, round_id: str, subject: Subject, decision: Decision
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
    existing: ConfirmationRoundRow, principal: Principal, subject: Subject, decision: Decision
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
