"""What every benchmark needs: the simulator as a separate process, and fresh migrated databases."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from adapter.store.migrate import upgrade
from legacy_sim.process import running_simulator

__all__ = [
    "DEFAULT_POSTGRES_URL",
    "UNMETERED",
    "backend_seconds",
    "fresh_database",
    "simulator",
    "unmetered_env",
]

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


def backend_seconds(conn: Any, application_name: str) -> dict[int, float]:
    """CPU seconds used so far by each PostgreSQL backend whose ``application_name`` is this one,
    asked on ``conn`` (a psycopg connection; Linux ``/proc``, PostgreSQL on this machine): how a
    benchmark tells its own backends' CPU from every other one's. Compare two samples pid by pid: a
    backend opened in between counts from 0."""
    query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
    pids = [int(pid) for (pid,) in conn.execute(query, (application_name,)).fetchall()]
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[int, float] = {}
    for pid in pids:
        try:
            stat = (Path("/proc") / str(pid) / "stat").read_text()
        except OSError:
            continue  # the backend ended meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        used[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return used
