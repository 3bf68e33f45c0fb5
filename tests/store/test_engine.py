"""The engine never lets record contents into error messages (which end up in logs), and the unit of
work hands out the kit's own store errors, never a driver's."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from adapter.domain.errors import StoreConflict, StoreUnavailable
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


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("where", ["sqlite-missing-dir", "postgres-closed-port"])
def test_a_database_that_does_not_answer_is_store_unavailable_on_both_paths(
    where: str, tmp_path: Path
) -> None:
    if where == "sqlite-missing-dir":
        url = f"sqlite:///{tmp_path / 'gone' / 'adapter.db'}"
    else:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/adapter?connect_timeout=5"
    store = Store.from_url(url)
    try:
        with pytest.raises(StoreUnavailable) as unit, store.unit_of_work() as uow:
            uow.ping()
        with pytest.raises(StoreUnavailable) as read:
            store.import_with_operations("x")
    finally:
        store.dispose()
    for caught in (unit, read):
        assert caught.value.code == "database_unavailable" and caught.value.__cause__ is not None


def test_a_url_no_driver_understands_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a usable database URL"):
        Store.from_url("nosuchdialect://x")
