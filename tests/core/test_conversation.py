"""The commit conversation (``services/commit/confirmation.py``), without any transport.

Both protocol eras and the Tasks path drive this one state machine; these tests drive it directly
on a real store (SQLite, and PostgreSQL when configured), with the kit's clock moved by hand, so a
confirmation's lifetime is proven without waiting for it.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from adapter.domain.confirmation import (
    NOTHING_CONFIRMED,
    CommitSubject,
    ConfirmationRules,
    FormRequired,
    VoidSubject,
    question_text,
)
from adapter.domain.errors import ConfirmationStale, ConfirmationUsed, HandleNotFound, InvalidRequest
from adapter.domain.identity import Principal
from adapter.services import ImportService, ServiceContext
from adapter.services.commit.confirmation import (
    Ask,
    ConfirmationMissing,
    Conversation,
    Decision,
    Declined,
    Proceed,
    Round,
)
from legacy_sim.engine import LegacyEngine
from tests.support.imports import records, staged


@pytest.fixture
def talk(ctx: ServiceContext) -> Conversation:
    ctx.confirmation = ConfirmationRules("when-supported", max_rounds=3, max_seconds=600)
    return Conversation(ctx)


def asked(step: object) -> Round:
    assert isinstance(step, Ask), step
    return step.round


def test_nobody_to_ask_commits_at_once_with_the_callers_key(
    talk: Conversation, service: ImportService, alice: Principal
) -> None:
    handle = staged(service, alice, 2)
    assert talk.start(alice, handle, key="k", ask=False) == Proceed("k", None)


def test_the_first_question_names_what_the_store_holds_on_the_kits_clock(
    talk: Conversation, service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    handle = staged(service, alice, 3)
    round_ = asked(talk.start(alice, handle, key=None, ask=True))
    view = service.status(alice, handle)
    assert round_.subject == CommitSubject(view.import_id, "customers", 3)
    assert round_.number == 1
    assert abs((ctx.clock() - round_.started).total_seconds()) < 5
    restored = Round.from_state(round_.to_state())  # what a transport seals and gets back
    assert abs((restored.started - round_.started).total_seconds()) < 0.001
    assert dataclasses.replace(restored, started=round_.started) == round_


def test_an_import_with_nothing_to_ask_about_commits_with_nothing_confirmed(
    talk: Conversation, service: ImportService, alice: Principal
) -> None:
    empty = service.begin(alice, "customers").handle
    assert talk.start(alice, empty, key=None, ask=True) == Proceed(None, NOTHING_CONFIRMED)


def test_an_accepted_round_commits_exactly_what_it_showed_once_under_a_key_of_its_own(
    talk: Conversation, service: ImportService, alice: Principal
) -> None:
    handle = staged(service, alice, 2)
    round_ = asked(talk.start(alice, handle, key=None, ask=True))

    first = talk.answer(alice, handle, round_, Decision.ACCEPTED, key=None)
    again = talk.answer(alice, handle, round_, Decision.ACCEPTED, key=None)

    assert first == Proceed(f"confirmed:{round_.round_id}", round_.subject, round_)
    assert again == first, "the same final round delivered twice names the same commit"
    assert talk.answer(alice, handle, round_, Decision.ACCEPTED, key="mine").key == "mine"
    with pytest.raises(ConfirmationUsed):
        talk.answer(alice, handle, round_, Decision.DECLINED, key=None)


def test_a_declined_round_stays_declined_and_cannot_be_turned_into_an_accept(
    talk: Conversation, service: ImportService, alice: Principal
) -> None:
    handle = staged(service, alice, 4)
    round_ = asked(talk.start(alice, handle, key=None, ask=True))
    assert talk.answer(alice, handle, round_, Decision.DECLINED, key=None) == Declined(4)
    assert talk.answer(alice, handle, round_, Decision.DECLINED, key=None) == Declined(4)
    with pytest.raises(ConfirmationUsed):
        talk.answer(alice, handle, round_, Decision.ACCEPTED, key=None)


def test_no_usable_answer_asks_again_until_the_last_round(
    talk: Conversation, service: ImportService, alice: Principal
) -> None:
    handle = staged(service, alice, 1)
    first = asked(talk.start(alice, handle, key=None, ask=True))
    second = asked(talk.answer(alice, handle, first, Decision.MISSING, key=None))
    third = asked(talk.answer(alice, handle, second, Decision.MISSING, key=None))
    assert [r.number for r in (first, second, third)] == [1, 2, 3]
    assert len({r.round_id for r in (first, second, third)}) == 3
    assert second.started == first.started == third.started, "the lifetime counts from the first round"
    with pytest.raises(ConfirmationMissing):
        talk.answer(alice, handle, third, Decision.MISSING, key=None)


def test_a_stale_accept_is_asked_again_with_todays_numbers_then_refused_after_the_last_round(
    talk: Conversation, service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, 2)
    round_ = asked(talk.start(alice, handle, key=None, ask=True))
    step = talk.answer(alice, handle, round_, Decision.ACCEPTED, key=None)
    assert isinstance(step, Proceed)
    service.add(alice, handle, records(1))  # a record slips in after the question
    with pytest.raises(ConfirmationStale) as stale:
        service.commit(alice, handle, idempotency_key=step.key, expect=step.expect)

    again = asked(talk.stale(step.round, stale.value))

    assert (again.number, again.subject.record_count) == (2, 3)
    assert legacy_engine.committed_batches() == []
    # The stale round itself never commits: accepting it again asks again.
    assert isinstance(talk.answer(alice, handle, round_, Decision.ACCEPTED, key=None), Ask)
    last = dataclasses.replace(again, number=3)
    with pytest.raises(ConfirmationStale):
        talk.stale(last, stale.value)


def test_a_commit_nobody_was_asked_about_that_became_committable_asks_a_first_question(
    talk: Conversation, service: ImportService, alice: Principal
) -> None:
    handle = service.begin(alice, "customers").handle
    step = talk.start(alice, handle, key=None, ask=True)
    assert step == Proceed(None, NOTHING_CONFIRMED)
    service.add(alice, handle, records(2))
    with pytest.raises(ConfirmationStale) as stale:
        service.commit(alice, handle, expect=NOTHING_CONFIRMED)
    assert asked(talk.stale(None, stale.value)).number == 1


def test_a_confirmation_expires_on_the_kits_clock_from_its_first_round(
    talk: Conversation, service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    handle = staged(service, alice, 1)
    round_ = asked(talk.start(alice, handle, key=None, ask=True))
    now = ctx.clock()
    ctx.clock = lambda: now + timedelta(seconds=599)
    assert isinstance(talk.answer(alice, handle, round_, Decision.MISSING, key=None), Ask)
    ctx.clock = lambda: now + timedelta(seconds=601)
    with pytest.raises(InvalidRequest, match="took too long"):
        talk.answer(alice, handle, round_, Decision.ACCEPTED, key=None)


def test_another_principals_round_is_not_theirs_to_answer(
    talk: Conversation, service: ImportService, alice: Principal, bob: Principal
) -> None:
    handle = staged(service, alice, 1)
    round_ = asked(talk.start(alice, handle, key=None, ask=True))
    talk.answer(alice, handle, round_, Decision.DECLINED, key=None)
    with pytest.raises(HandleNotFound):
        talk.answer(bob, handle, round_, Decision.DECLINED, key=None)


@pytest.mark.parametrize(
    ("mode", "can_show_form", "asked_"),
    [
        ("when-supported", True, True),
        ("when-supported", False, False),
        ("always", True, True),
        ("always", False, FormRequired),
        ("never", True, False),
        ("never", False, False),
    ],
)
def test_who_is_asked(mode: str, can_show_form: bool, asked_: bool | type[Exception]) -> None:
    rules = ConfirmationRules(mode, 3, 600)  # type: ignore[arg-type]
    if isinstance(asked_, bool):
        assert rules.should_ask(can_show_form) is asked_
    else:
        with pytest.raises(asked_):
            rules.should_ask(can_show_form)


@pytest.mark.parametrize(
    "state",
    [{}, {"round_id": "r", "round": "1", "started": 0, "subject": {}}, {"round_id": "r", "round": 1}],
)
def test_a_state_that_holds_no_round_is_refused(state: dict[str, object]) -> None:
    with pytest.raises((KeyError, TypeError, ValueError)):
        Round.from_state(state)


# --- an abort that may void a batch is asked about the same way ------------------------------------


def test_an_abort_that_would_void_a_landed_batch_asks_about_exactly_that_batch(
    talk: Conversation, service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, 2)
    committed = service.commit(alice, handle)
    round_ = asked(talk.start(alice, handle, key=None, ask=True, purpose="void"))

    assert round_.subject == VoidSubject(
        committed_import(service, alice, handle), "customers", 2, committed.legacy_batch_id
    )
    assert f'"{committed.legacy_batch_id}"' in question_text(round_.subject)
    step = talk.answer(alice, handle, round_, Decision.ACCEPTED, key=None)
    assert isinstance(step, Proceed) and step.expect == round_.subject
    assert service.abort(alice, handle, expect=step.expect).status == "compensated"
    [batch] = legacy_engine.committed_batches()
    assert batch["voided"]


def test_dropping_an_open_imports_records_asks_nothing(
    talk: Conversation, service: ImportService, alice: Principal
) -> None:
    handle = staged(service, alice, 2)
    step = talk.start(alice, handle, key=None, ask=True, purpose="void")
    assert step == Proceed(None, NOTHING_CONFIRMED)
    assert service.abort(alice, handle, expect=NOTHING_CONFIRMED).status == "aborted"


def test_an_abort_confirmed_before_the_import_changed_voids_nothing_and_asks_again(
    talk: Conversation, service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """Asked while the import was open (nothing to void), answered after it committed."""
    handle = staged(service, alice, 2)
    step = talk.start(alice, handle, key=None, ask=True, purpose="void")
    service.commit(alice, handle)
    with pytest.raises(ConfirmationStale) as stale:
        service.abort(alice, handle, expect=step.expect)  # type: ignore[union-attr]
    again = asked(talk.stale(None, stale.value))
    assert isinstance(again.subject, VoidSubject) and again.subject.legacy_batch_id is not None
    assert service.status(alice, handle).status == "committed"
    [batch] = legacy_engine.committed_batches()
    assert not batch["voided"]


def committed_import(service: ImportService, who: Principal, handle: str) -> str:
    return service.status(who, handle).import_id


def test_a_record_replaced_after_the_question_is_never_committed_unasked(
    talk: Conversation, service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """A replacement keeps the count: the import's revision is what tells the question is old."""
    handle = staged(service, alice, 3)
    round_ = asked(talk.start(alice, handle, key=None, ask=True))
    service.replace(alice, handle, [(1, {"n": "changed"})])
    step = talk.answer(alice, handle, round_, Decision.ACCEPTED, key=None)
    assert isinstance(step, Proceed)
    with pytest.raises(ConfirmationStale) as stale:
        service.commit(alice, handle, idempotency_key=step.key, expect=step.expect)  # type: ignore[arg-type]

    again = asked(talk.stale(step.round, stale.value))

    assert isinstance(again.subject, CommitSubject)
    assert (again.subject.record_count, again.subject.revision) == (3, round_.subject.revision + 1)  # type: ignore[union-attr]
    assert legacy_engine.committed_batches() == []
