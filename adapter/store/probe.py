"""Readiness of the store: it must take a write, not only answer ``SELECT 1``.

A read-only store (a replica after failover, a SQLite file without write permission, a full disk)
answers reads but fails every state change; /readyz must say so. The probe sets the one row of
``alembic_version`` to its own value and commits: nothing changes, the write really reaches the
database (on SQLite a rolled-back write never leaves the page cache, so a full disk went unseen),
and the connection keeps the statements it prepared (a ROLLBACK makes psycopg drop them all,
``store/driver.py``).
"""

from __future__ import annotations

from sqlalchemy import text

from adapter.store import Store

__all__ = ["probe_write"]


def probe_write(store: Store) -> None:
    """Raise what the database raises when it cannot take a write."""
    with store.unit_of_work() as uow:
        uow.session.execute(text("UPDATE alembic_version SET version_num = version_num"))
        uow.commit()
