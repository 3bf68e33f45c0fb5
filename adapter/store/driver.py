"""Prebuilt statements run on the DB-API cursor (PostgreSQL): the store's one such mechanism.

The hot paths (begin, add, the commit's recovery points) run a handful of fixed statements many
times a second. Through SQLAlchemy each execution costs an execution context and result processing
(about 40 us of CPU a statement), and a statement with a data-modifying CTE is not cached at all (it
would be compiled on every call, ~0.5 ms). Here each statement is compiled once per dialect and run
on the driver's cursor in the session's own transaction, so the unit of work still commits or rolls
back everything together. Values are converted once, here (``driver_value``), the way the ORM's
column types store them (times with ``tables.stored_time``, as ``UTCDateTime`` does); rows come
back raw (naive UTC times: ``tables.loaded_time`` hands them out as the ORM does).

Each is prepared on the server at its first use on a connection (psycopg's own threshold is the
fifth), and PostgreSQL plans it for any values after a few runs: planning a statement with
data-modifying CTEs costs about as much as running it (0.2-0.3 ms). A ROLLBACK on the connection
makes psycopg forget them all, which is why reads end with COMMIT (``unit_of_work.py``).

psycopg's ``%(name)s`` parameters only: SQLite runs the same statements through SQLAlchemy.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from psycopg.pq import ExecStatus
from sqlalchemy import ClauseElement, Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

from adapter.store.tables import stored_time

__all__ = ["compiled_for", "driver_value", "event_values", "run_on_driver"]

TUPLES_OK = ExecStatus.TUPLES_OK


def run_on_driver(connection: Connection, statement: ClauseElement, params: dict[str, Any]) -> list[Any]:
    """Run a prebuilt ``statement`` with ``params`` in ``connection``'s transaction; its rows
    (empty for a statement that returns none)."""
    sql, constants = compiled_for(statement, connection.dialect)
    values = constants | {name: driver_value(value) for name, value in params.items()}
    with connection.connection.driver_connection.cursor() as cursor:  # type: ignore[union-attr]
        cursor.execute(sql, values, prepare=True)  # see the module doc
        result = cursor.pgresult  # not ``description``: it builds a Column object per column, each call
        return list(cursor.fetchall()) if result is not None and result.status == TUPLES_OK else []


@functools.cache
def compiled_for(statement: ClauseElement, dialect: Dialect) -> tuple[str, dict[str, Any]]:
    """``statement`` compiled once for ``dialect``: its SQL, and the values of the constants that
    SQLAlchemy binds as parameters too (the ``0`` of a ``coalesce``, the states compared with)."""
    compiled = cast(SQLCompiler, statement.compile(dialect=dialect))
    constants = {name: bind.value for bind, name in compiled.bind_names.items() if not bind.required}
    return str(compiled), constants


def event_values(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The values of the events a statement writes, ``e<i>_<column>`` for the ``i``-th event (a dict
    of ``EventRow``'s columns, ``tables.new_event``): how every statement here names them."""
    return {f"e{index}_{name}": value for index, event in enumerate(events) for name, value in event.items()}


def driver_value(value: Any) -> Any:
    """A bind value as the driver takes it: JSON columns (dicts) as their text, times as naive UTC
    (what ``UTCDateTime`` stores). An aware time would reach PostgreSQL as ``timestamptz`` and be
    cast to ``timestamp`` in the session's time zone, shifted wherever that is not UTC."""
    if isinstance(value, datetime):
        return stored_time(value)
    return json.dumps(value) if isinstance(value, dict) else value
