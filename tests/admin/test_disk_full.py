"""A full disk over real HTTP: ``/readyz`` says not ready and one log line names the cause.

The readiness probe writes and rolls back, which needs no space, so on a full disk it said ready
while every add failed with ``database_unavailable`` and nothing in the log said why. SQLite's
``max_page_count`` makes the database file full for real (``SQLITE_FULL``, what a full disk gives);
PostgreSQL's ``disk_full`` (53100) is recognised from the driver's own error class.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import psycopg.errors
import pytest
from sqlalchemy import event, exc

from adapter.store.errors import StoreHealth, disk_full


def _fill_up(store: Any) -> None:
    """From now on every new connection may not grow the file: the next page it needs is refused."""

    def cap(dbapi_connection: Any, _: Any) -> None:
        cursor = dbapi_connection.cursor()
        pages = cursor.execute("PRAGMA page_count").fetchone()[0]
        cursor.execute(f"PRAGMA max_page_count = {pages}")
        cursor.close()

    event.listen(store.engine, "connect", cap)
    store.engine.dispose()  # the pooled connections were made before


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_full_disk_makes_readyz_say_not_ready_and_names_the_cause(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapter")
    handle = server.tool("begin_import", {"target": "customers"})["structuredContent"]["handle"]
    assert server.get("/readyz", token=None).status_code == 200
    _fill_up(server.kit.store)
    refused = server.tool("add_records", {"handle": handle, "records": [{"b": "x" * 60_000}] * 8})
    assert refused["isError"] and refused["content"][0]["text"].startswith("database_unavailable:")
    ready = server.get("/readyz", token=None)
    assert ready.status_code == 503
    assert any(p.startswith("database disk full") for p in ready.json()["problems"]), ready.json()
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "adapter.store"]
    assert [line["event"] for line in lines] == ["store.disk_full"]
    assert lines[0]["cause"] == "the database's disk is full"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("settings_overrides", [{"min_free_disk_bytes": 10**18}])
def test_too_little_free_space_is_not_ready_either(server: Any) -> None:
    ready = server.get("/readyz", token=None)
    assert ready.status_code == 503
    [problem] = ready.json()["problems"]
    assert problem.startswith("database disk nearly full:") and "ADAPTER_MIN_FREE_DISK_BYTES" in problem


def test_postgresql_disk_full_is_recognised_and_remembered_for_a_while() -> None:
    now = [100.0]
    health = StoreHealth(clock=lambda: now[0])
    wrapped = exc.OperationalError("INSERT ...", {}, psycopg.errors.DiskFull("could not extend file"))
    assert disk_full(wrapped) and not disk_full(exc.OperationalError("x", {}, psycopg.errors.AdminShutdown()))
    health.note(wrapped)
    now[0] += 30
    assert health.disk_full_since() == 30
    now[0] += StoreHealth.WINDOW
    assert health.disk_full_since() is None
