"""A legacy SQL database for the SQL port: SQLite in a file, or a schema of its own in PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from tests.support.constants import POSTGRES_URL
from tests.support.postgres import postgres_schema, require_postgres

LEGACY_TABLES = {
    "sqlite": [
        """CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(100) NOT NULL, email TEXT,
           balance NUMERIC(12, 2) DEFAULT 0, born DATE)""",
        "CREATE TABLE order_lines (order_no INTEGER NOT NULL, line INTEGER NOT NULL, sku TEXT NOT NULL,"
        " PRIMARY KEY (order_no, line))",
        "CREATE TABLE audit_log (message TEXT)",  # no primary key: not a target
    ],
    "postgres": [
        """CREATE TABLE customers (id SERIAL PRIMARY KEY, name VARCHAR(100) NOT NULL, email TEXT,
           balance NUMERIC(12, 2) DEFAULT 0, born DATE)""",
        "CREATE TABLE order_lines (order_no INTEGER NOT NULL, line INTEGER NOT NULL, sku TEXT NOT NULL,"
        " PRIMARY KEY (order_no, line))",
        "CREATE TABLE audit_log (message TEXT)",
    ],
}


@dataclass
class LegacyDatabase:
    url: str
    schema: str | None
    engine: Engine


BOTH_DATABASES = [
    "sqlite",
    pytest.param(
        "postgres",
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(not POSTGRES_URL, reason="ADAPTER_TEST_POSTGRES_URL not set"),
        ],
    ),
]


@contextmanager
def legacy_database(kind: str, tmp_path: Path, ddl: Sequence[str]) -> Iterator[LegacyDatabase]:
    """A legacy database holding the tables ``ddl`` creates: a SQLite file, or a PostgreSQL schema."""
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'erp.db'}"
        engine = create_engine(url)
        with engine.begin() as conn:
            for statement in ddl:
                conn.execute(text(statement))
        yield LegacyDatabase(url, None, engine)
        engine.dispose()
        return
    with postgres_schema("legacy") as (engine, schema):  # skips where PostgreSQL is not configured
        with engine.begin() as conn:
            conn.execute(text(f'SET search_path TO "{schema}"'))
            for statement in ddl:
                conn.execute(text(statement))
        yield LegacyDatabase(require_postgres(), schema, engine)


@pytest.fixture(params=BOTH_DATABASES)
def legacy_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LegacyDatabase]:
    """A legacy database with customers, order_lines (composite key) and audit_log (no key)."""
    with legacy_database(request.param, tmp_path, LEGACY_TABLES[request.param]) as database:
        yield database
