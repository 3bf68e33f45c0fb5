"""The engine never lets record contents into error messages (which end up in logs)."""

from __future__ import annotations

import pytest

from adapter.store import Store


def test_a_database_error_does_not_carry_record_contents(store: Store) -> None:
    # SQLAlchemy's IntegrityError on SQLite; psycopg's own on PostgreSQL (staging uses COPY).
    with pytest.raises(Exception, match=r"(?i)foreign key") as caught, store.unit_of_work() as uow:
        uow.records.stage("no-such-import", 1, ['{"card":"s3cret-4111"}'])
        uow.commit()

    assert "s3cret" not in str(caught.value) and "s3cret" not in repr(caught.value)
