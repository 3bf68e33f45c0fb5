"""Alembic migrations upgrade and downgrade cleanly, and match the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from adapter.store.migrate import downgrade, upgrade
from adapter.store.tables import Base

TABLES = {
    "imports",
    "staged_chunks",
    "operations",
    "compensations",
    "events",
    "audit_records",
    "confirmation_rounds",
    "operator_sessions",
    "tenant_held_bytes",
    "held_bytes_changes",
}


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_creates_every_table_and_downgrade_removes_them(db_url: str) -> None:
    upgrade(db_url)
    assert _tables(db_url) == TABLES

    downgrade(db_url)
    assert _tables(db_url) == set()

    upgrade(db_url)
    assert _tables(db_url) == TABLES


def test_migrations_match_the_models(db_url: str) -> None:
    upgrade(db_url)
    engine = create_engine(db_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": False})
            differences = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert differences == []
