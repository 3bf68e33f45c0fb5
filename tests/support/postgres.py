"""A schema of its own on the test PostgreSQL server, so runs do not interfere and nothing is left."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text

from tests.support.constants import POSTGRES_URL

__all__ = ["postgres_schema", "require_postgres", "schema_url"]


def require_postgres() -> str:
    """The test server's URL, or a skip where ``ADAPTER_TEST_POSTGRES_URL`` is not set.

    Every PostgreSQL fixture goes through here, so a PostgreSQL parameter that lacks its skip mark
    (a bare ``"postgres"``) skips on a fresh clone instead of erroring at set-up.
    """
    if not POSTGRES_URL:
        pytest.skip("ADAPTER_TEST_POSTGRES_URL not set")
    return POSTGRES_URL


def schema_url(schema: str, **query: str) -> str:
    """The test server's URL with ``schema`` first on the search path, and any further query
    parameters (``application_name=...``)."""
    base = require_postgres()
    parameters = "&".join([f"options=-csearch_path%3D{schema}", *(f"{k}={v}" for k, v in query.items())])
    return f"{base}{'&' if '?' in base else '?'}{parameters}"


@contextlib.contextmanager
def postgres_schema(prefix: str) -> Iterator[tuple[Engine, str]]:
    """A new schema named ``<prefix>_<random>`` and an engine on the server; the schema is dropped,
    with everything in it, at the end."""
    schema = f"{prefix}_{secrets.token_hex(6)}"
    engine = create_engine(require_postgres())
    with engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield engine, schema
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()
