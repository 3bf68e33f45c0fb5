"""The engine never lets record contents into error messages (which end up in logs), and the unit of
work hands out the kit's own store errors, never a driver's."""

from __future__ import annotations

import pytest

from adapter.domain.errors import StoreConflict
from adapter.store import Store


def test_a_database_error_does_not_carry_record_contents(store: Store) -> None:
    # SQLAlchemy's IntegrityError on SQLite; psycopg's own on PostgreSQL (staging uses COPY). Either
    # way the unit of work raises StoreConflict, with the driver's error as its cause.
    with pytest.raises(StoreConflict) as caught, store.unit_of_work() as uow:
        uow.records.stage("no-such-import", 1, ['{"card":"s3cret-4111"}'])
        uow.commit()

    cause = caught.value.__cause__
    assert cause is not None and "foreign key" in str(cause).lower()
    for error in (caught.value, cause):
        assert "s3cret" not in str(error) and "s3cret" not in repr(error)
