"""A schema of its own on the test PostgreSQL server, so runs do not interfere and nothing is left."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator

from sqlalchemy import Engine, create_engine, text

from tests.support.constants import POSTGRES_URL

__all__ = ["postgres_schema"]


@contextlib.contextmanager
def postgres_schema(prefix: str) -> Iterator[tuple[Engine, str]]:
    """A new schema named ``<prefix>_<random>`` and an engine on the server; the schema is dropped,
    with everything in it, at the end."""
    assert POSTGRES_URL
    schema = f"{prefix}_{secrets.token_hex(6)}"
    engine = create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield engine, schema
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()
