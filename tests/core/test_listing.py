"""Listing imports page by page: stable under concurrent inserts and deletes, cursors bound and signed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from freezegun import freeze_time

from adapter.domain.cursors import InvalidCursor
from adapter.domain.identity import Principal
from adapter.services import ImportService, ServiceContext


def all_pages(service: ImportService, who: Principal, limit: int, between=None) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = service.list_imports(who, cursor=cursor, limit=limit)
        seen.extend(item.import_id for item in page.items)
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
        if between:
            between()


def test_pages_list_the_callers_imports_newest_first_without_others(
    service: ImportService, alice: Principal, bob: Principal
) -> None:
    mine = [service.begin(alice, f"t{i}").import_id for i in range(7)]
    service.begin(bob, "theirs")

    assert all_pages(service, alice, limit=3) == list(reversed(mine))


def test_imports_created_between_pages_cause_no_duplicates_or_gaps(
    service: ImportService, alice: Principal
) -> None:
    existing = [service.begin(alice, f"t{i}").import_id for i in range(10)]

    listed = all_pages(service, alice, limit=3, between=lambda: service.begin(alice, "new"))

    assert listed == list(reversed(existing))


def test_an_import_deleted_between_pages_causes_no_gap(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    existing = [service.begin(alice, f"t{i}").import_id for i in range(6)]
    first = service.list_imports(alice, cursor=None, limit=3)
    with ctx.store.unit_of_work() as uow:
        row = uow.imports.get(first.items[-1].import_id)
        uow.session.delete(row)
        uow.commit()

    second = service.list_imports(alice, cursor=first.next_cursor, limit=3)

    assert [i.import_id for i in second.items] == list(reversed(existing))[3:]


def test_a_cursor_is_refused_for_another_principal_tampered_or_expired(
    service: ImportService, alice: Principal, bob: Principal
) -> None:
    with freeze_time("2026-05-01 10:00:00") as frozen:
        for i in range(3):
            service.begin(alice, f"t{i}")
        cursor = service.list_imports(alice, cursor=None, limit=1).next_cursor
        assert cursor is not None

        with pytest.raises(InvalidCursor):
            service.list_imports(bob, cursor=cursor, limit=1)
        body, mac = cursor.split(".")
        with pytest.raises(InvalidCursor):
            service.list_imports(alice, cursor=body[:-2] + "AA." + mac, limit=1)
        with pytest.raises(InvalidCursor):
            service.list_imports(alice, cursor="not-a-cursor", limit=1)
        service.list_imports(alice, cursor=cursor, limit=1)  # still valid
        frozen.tick(timedelta(hours=1))
        with pytest.raises(InvalidCursor):
            service.list_imports(alice, cursor=cursor, limit=1)
