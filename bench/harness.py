"""What every benchmark needs: the simulator as a separate process, and fresh migrated databases."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, text

from adapter.store.migrate import upgrade
from legacy_sim.process import running_simulator

__all__ = ["DEFAULT_POSTGRES_URL", "UNMETERED", "fresh_database", "simulator", "unmetered_env"]

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

UNMETERED: dict[str, int] = {
    "max_stage_bytes_per_second_per_principal": 1 << 40,
    "max_stage_records_per_second_per_principal": 1 << 30,
    "max_stage_bytes_per_second_per_tenant": 1 << 40,
    "max_stage_records_per_second_per_tenant": 1 << 30,
    "max_request_bytes_per_second_per_principal": 1 << 40,
    "max_json_elements_per_second_per_principal": 1 << 40,
    "max_requests_per_second_per_principal": 1 << 30,
}
"""The per-principal and per-tenant rates (staging, request budget) out of reach: a benchmark of the
kit's speed drives one principal as fast as it can, which is the load it measures, not a caller to
slow down. ``bench/abuse.py`` keeps the defaults: there they are the point."""


def unmetered_env() -> dict[str, str]:
    """:data:`UNMETERED` as ``ADAPTER_*`` environment variables (a server started as a process)."""
    return {f"ADAPTER_{name.upper()}": str(value) for name, value in UNMETERED.items()}


def simulator(workdir: Path) -> contextlib.AbstractContextManager[tuple[str, int]]:
    """The simulator over TCP with its data in ``workdir/legacy.db``; idle timeout off, so a long
    staging phase cannot expire a session."""
    return running_simulator(workdir / "legacy.db", "--idle-timeout", "0")


@contextlib.contextmanager
def fresh_database(kind: str, workdir: Path, postgres_url: str = DEFAULT_POSTGRES_URL) -> Iterator[str]:
    """A migrated, empty database URL: a new SQLite file in ``workdir`` or a throwaway PostgreSQL schema."""
    if kind == "sqlite":
        url = f"sqlite:///{workdir / f'adapter-{secrets.token_hex(4)}.db'}"
        upgrade(url)
        yield url
        return
    schema = f"bench_{secrets.token_hex(6)}"
    admin = create_engine(postgres_url)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        separator = "&" if "?" in postgres_url else "?"
        url = f"{postgres_url}{separator}options=-csearch_path%3D{schema}"
        upgrade(url)
        yield url
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
