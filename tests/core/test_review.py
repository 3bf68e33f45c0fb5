"""An import's review (``ImportService.review``): the owner's records a page at a time, per-field
missing counts counted in the database, and the question a confirmation would ask with what it binds.

On SQLite and PostgreSQL (the counts are each database's JSON functions), against the simulator
over TCP for the commit and the void.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from adapter.domain.confirmation import CommitSubject, VoidSubject, question_text
from adapter.domain.errors import HandleNotFound, InvalidRequest
from adapter.domain.identity import Principal
from adapter.ports.legacy import Target
from adapter.services import ImportService, ServiceContext
from adapter.services.review import MAX_FIELDS, content_digest
from adapter.services.targets import TargetRules
from tests.support.imports import staged

CUSTOMER = Target(
    "customers",
    "People we bill",
    {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "name": {"type": ["string", "null"]}, "email": {}},
        "required": ["id"],
    },
)


@pytest.fixture
def typed(ctx: ServiceContext) -> ImportService:
    """The service with a target that declares its fields (and the permissive ``*`` beside it)."""
    ctx = dataclasses.replace(ctx, targets=TargetRules((CUSTOMER, Target("*"))))
    return ImportService(ctx)


def _rows(n: int) -> list[dict[str, object]]:
    """Every third record has no email, every fifth a null name."""
    rows: list[dict[str, object]] = []
    for i in range(1, n + 1):
        row: dict[str, object] = {"id": i, "name": None if i % 5 == 0 else f"customer {i}"}
        if i % 3:
            row["email"] = f"c{i}@example.org"
        rows.append(row)
    return rows


def test_a_page_of_the_owners_records_and_the_missing_counts_of_all(
    typed: ImportService, alice: Principal
) -> None:
    handle = staged(typed, alice, _rows(45), chunk=20)

    first = typed.review(alice, handle, size=20)
    second = typed.review(alice, handle, after=first.page.next_after or 0, size=20)
    last = typed.review(alice, handle, after=40, size=20)

    assert [r.seq for r in first.page.records] == list(range(1, 21))
    assert first.page.records[0].record == {"id": 1, "name": "customer 1", "email": "c1@example.org"}
    assert first.page.next_after == 20
    assert [r.seq for r in second.page.records] == list(range(21, 41))
    assert [r.seq for r in last.page.records] == list(range(41, 46)) and last.page.next_after is None
    assert first.fields_from == "schema"
    # over all 45 records, not the page: 15 without email, 9 with a null name, none without id
    assert [(c.field, c.missing) for c in first.missing] == [("id", 0), ("name", 9), ("email", 15)]
    assert first.view.record_count == first.reviewed_count == 45
    assert (first.target.name, first.target.description) == ("customers", "People we bill")


def test_the_question_is_the_confirmations_and_names_what_it_binds(
    typed: ImportService, alice: Principal
) -> None:
    handle = staged(typed, alice, _rows(3))
    before = typed.review(alice, handle)
    typed.add(alice, handle, [{"id": 4}])
    after = typed.review(alice, handle)
    row_id = before.view.import_id

    assert before.question is not None and after.question is not None
    assert before.question.purpose == "commit"
    assert before.question.text == question_text(CommitSubject(row_id, "customers", 3))
    assert (before.question.record_count, after.question.record_count) == (3, 4)
    assert before.question.content_digest is not None
    assert after.question.content_digest not in (None, before.question.content_digest)
    assert [c.missing for c in after.missing] == [0, 1, 2]  # the added record has no name, no email


def test_the_content_digest_names_the_content_not_only_the_count(
    typed: ImportService, alice: Principal
) -> None:
    one = typed.review(alice, staged(typed, alice, [{"id": 1}, {"id": 2}]))
    other = typed.review(alice, staged(typed, alice, [{"id": 1}, {"id": 3}]))
    same_again = typed.review(alice, staged(typed, alice, [{"id": 1}, {"id": 2}]))

    assert one.content_digest is not None and other.content_digest is not None
    assert one.content_digest != other.content_digest
    # the fingerprints include the import's handle: another import of the same records differs too
    assert same_again.content_digest not in (one.content_digest, other.content_digest)


def test_a_replacement_moves_the_digest_and_shows_on_the_page(typed: ImportService, alice: Principal) -> None:
    """A replacement keeps the count; the review's digest and the question's move all the same,
    and the page shows the record now staged."""
    handle = staged(typed, alice, [{"id": 1}, {"id": 2}])
    before = typed.review(alice, handle)
    typed.replace(alice, handle, [(1, {"id": 20, "name": "fixed"})])
    after = typed.review(alice, handle)

    assert before.question is not None and after.question is not None
    assert after.question.record_count == before.question.record_count == 2
    assert after.content_digest not in (None, before.content_digest)
    assert after.question.content_digest == after.content_digest
    assert [r.record for r in after.page.records] == [{"id": 1}, {"id": 20, "name": "fixed"}]


def test_a_digest_needs_every_add_of_the_range() -> None:
    fp = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3)]
    adds = [(fp[1], {"first_seq": 3, "accepted": 2}), (fp[0], {"first_seq": 1, "accepted": 2})]

    assert content_digest(adds, 4) == hashlib.sha256(f"{fp[0]}\n{fp[1]}".encode()).hexdigest()
    assert content_digest(adds, 2) == hashlib.sha256(fp[0].encode()).hexdigest()  # the first add alone
    assert content_digest(adds[:1], 4) is None  # records 3..4: no add on record
    assert content_digest([(fp[2], {"first_seq": 2, "accepted": 1})], 2) is None  # a gap at 1
    assert content_digest([], 0) is None


def test_a_target_without_fields_is_counted_on_the_fields_the_page_shows(
    service: ImportService, alice: Principal
) -> None:
    handle = staged(service, alice, [{"a": 1}, {"b": 2}, {"a": None, "c": 3}, {"d": 4}])

    review = service.review(alice, handle, size=3)

    assert review.fields_from == "records"
    assert [(c.field, c.missing) for c in review.missing] == [("a", 3), ("b", 3), ("c", 3)]


def test_field_names_are_bounded_and_odd_ones_are_not_counted(
    service: ImportService, alice: Principal
) -> None:
    wide = {f"f{i}": i for i in range(MAX_FIELDS + 10)} | {'say "hi"': 1}
    review = service.review(alice, staged(service, alice, [wide]))

    assert len(review.missing) == MAX_FIELDS
    odd = service.review(alice, staged(service, alice, [{'say "hi"': 1, "back\\slash": 2, "ok": 3}]))
    assert [(c.field, c.missing) for c in odd.missing] == [
        ('say "hi"', None),
        ("back\\slash", None),
        ("ok", 0),
    ]


def test_another_principals_import_is_not_found(
    service: ImportService, alice: Principal, bob: Principal
) -> None:
    handle = staged(service, alice, 3)

    with pytest.raises(HandleNotFound):
        service.review(bob, handle)
    with pytest.raises(HandleNotFound):
        service.review(bob, "imp_" + "A" * 32)


@pytest.mark.parametrize(("after", "size"), [(-1, 20), (0, 0), (0, 101), (True, 20)])
def test_a_page_out_of_bounds_is_refused(
    service: ImportService, alice: Principal, after: int, size: int
) -> None:
    handle = staged(service, alice, 1)
    with pytest.raises(InvalidRequest):
        service.review(alice, handle, after=after, size=size)


def test_a_committed_import_asks_about_the_void_and_an_aborted_one_asks_nothing(
    service: ImportService, alice: Principal
) -> None:
    handle = staged(service, alice, 2)
    committed = service.commit(alice, handle)
    review = service.review(alice, handle)
    open_one = staged(service, alice, 2)
    service.abort(alice, open_one)
    aborted = service.review(alice, open_one)

    assert committed.status == "committed" and review.view.status == "committed"
    assert review.question is not None and review.question.purpose == "void"
    subject = VoidSubject(review.view.import_id, "customers", 2, committed.legacy_batch_id)
    assert review.question.text == question_text(subject)
    assert review.question.legacy_batch_id == committed.legacy_batch_id
    assert [r.seq for r in review.page.records] == [1, 2]  # kept until the purge
    assert aborted.view.status == "aborted" and aborted.question is None
    assert aborted.page.records == () and aborted.reviewed_count == 2
