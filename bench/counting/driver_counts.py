"""SQL statements and transactions counted on the driver (psycopg), for the benchmarks.

:func:`install` wraps psycopg's cursor (``execute``, ``executemany``, ``copy``) and connection (``commit``,
``rollback``); :data:`COUNTS` then holds the running totals of this process. Counting on the driver sees
every statement: the ones SQLAlchemy sends and the ones the store runs on the DB-API cursor itself.
"""

from __future__ import annotations

from typing import Any

import psycopg

COUNTS = {"statements": 0, "transactions": 0}
SEEN: list[str] = []
"""The text of each statement, in order, while :data:`RECORDING` holds ``True`` (``--show-sql``)."""
RECORDING = [False]


def _counted(method: Any) -> Any:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        COUNTS["statements"] += 1  # the GIL makes the increment good enough for a benchmark's totals
        if RECORDING[0]:
            SEEN.append(" ".join(str(args[0] if args else kwargs.get("query")).split())[:160])
        return method(self, *args, **kwargs)

    return wrapper


def _ended(method: Any) -> Any:
    """A COMMIT or ROLLBACK that ends a transaction on the wire (psycopg sends none when idle, as
    after the pool's reset of a connection that ran nothing)."""

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            COUNTS["transactions"] += 1
            if RECORDING[0]:
                SEEN.append(method.__name__.upper())
        return method(self, *args, **kwargs)

    return wrapper


def install() -> None:
    """Count from now on, in this process (once)."""
    if getattr(psycopg.Cursor.execute, "_bench_counted", False):
        return
    for name in ("execute", "executemany", "copy"):
        setattr(psycopg.Cursor, name, _counted(getattr(psycopg.Cursor, name)))
    for name in ("commit", "rollback"):
        setattr(psycopg.Connection, name, _ended(getattr(psycopg.Connection, name)))
    psycopg.Cursor.execute._bench_counted = True  # type: ignore[attr-defined]
