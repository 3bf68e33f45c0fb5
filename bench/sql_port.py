"""Benchmark: records through the kit into a PostgreSQL table via the SQL port, against a direct bulk insert.

The kit's path (``ImportService`` over :class:`adapter.legacy.sql.SqlPort`): begin, ``add`` in
batches of 500 (every record validated against the table's reflected schema and staged durably in
the kit's store), commit (every staged record read back and inserted into the legacy table in one
transaction, plus its ledger row). The direct path: the same rows inserted into the same table in
one transaction with SQLAlchemy's bulk ``executemany`` (and, for reference, with ``COPY``).
Target: kit / direct <= 3x (the kit writes every record twice and reads it once).

Usage::

    .venv/bin/python bench/sql_port.py                       # 20,000 records, kit store on PostgreSQL
    .venv/bin/python bench/sql_port.py --store sqlite --repeat 3

The legacy table lives in a throwaway schema of its own; the kit's store in another (or a SQLite
file). Rounds interleave the paths. The last stdout line is one JSON object with every number.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import DEFAULT_POSTGRES_URL, UNMETERED, fresh_database
from sqlalchemy import Engine, MetaData, Table, create_engine, text

from adapter.bootstrap import build
from adapter.config import load_settings
from adapter.domain.identity import Principal
from adapter.legacy.sql import SqlPort

PRINCIPAL = Principal(subject="bench", tenant="bench")
TABLE_DDL = (
    "CREATE TABLE customers (id SERIAL PRIMARY KEY, name VARCHAR(100) NOT NULL, email TEXT, "
    "balance NUMERIC(12, 2) DEFAULT 0, born DATE)"
)


def records(n: int, tag: str) -> list[dict[str, Any]]:
    return [
        {
            "name": f"{tag} customer {i}",
            "email": f"c{i}@example.com",
            "balance": i % 1000 + 0.25,
            "born": None,
        }
        for i in range(n)
    ]


@contextmanager
def legacy_schema(url: str) -> Iterator[str]:
    schema = f"legacy_bench_{secrets.token_hex(5)}"
    admin = create_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        conn.execute(text(f'SET search_path TO "{schema}"'))
        conn.execute(text(TABLE_DDL))
    try:
        yield schema
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def count(engine: Engine, schema: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f'SELECT count(*) FROM "{schema}".customers')).scalar_one())


def direct_insert(engine: Engine, table: Table, rows: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
    return time.perf_counter() - started


def direct_copy(engine: Engine, schema: str, rows: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    raw = engine.raw_connection()
    try:
        sql = f'COPY "{schema}".customers (name, email, balance, born) FROM STDIN'
        with raw.cursor() as cur, cur.copy(sql) as copy:  # type: ignore[attr-defined]
            for r in rows:
                copy.write_row((r["name"], r["email"], r["balance"], r["born"]))
        raw.commit()
    finally:
        raw.close()
    return time.perf_counter() - started


def through_kit(port: SqlPort, store_url: str, rows: list[dict[str, Any]], batch: int) -> dict[str, float]:
    settings = load_settings(
        database_url=store_url, secret=secrets.token_hex(32), commit_chunk_size=500, **UNMETERED
    )
    kit = build(settings, legacy=port)
    try:
        started = time.perf_counter()
        handle = kit.service.begin(PRINCIPAL, "customers").handle
        for start in range(0, len(rows), batch):
            kit.service.add(PRINCIPAL, handle, rows[start : start + batch])
        staged = time.perf_counter()
        result = kit.service.commit(PRINCIPAL, handle)
        done = time.perf_counter()
    finally:
        kit.store.dispose()  # the port is shared across rounds: do not close it with the kit
    assert result.status == "committed", result
    assert result.record_count == len(rows)
    return {"total": done - started, "stage": staged - started, "commit": done - staged}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    args = parser.parse_args()

    kit_runs: list[dict[str, float]] = []
    insert_runs: list[float] = []
    copy_runs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, legacy_schema(args.postgres_url) as schema:
        engine = create_engine(args.postgres_url)
        table = Table("customers", MetaData(schema=schema), autoload_with=engine)
        port = SqlPort(args.postgres_url, schema=schema, tables=["customers"])
        for round_no in range(args.repeat):
            rows = records(args.records, f"r{round_no}")
            before = count(engine, schema)
            insert_runs.append(direct_insert(engine, table, rows))
            copy_runs.append(direct_copy(engine, schema, rows))
            with fresh_database(args.store, Path(tmp), args.postgres_url) as store_url:
                kit_runs.append(through_kit(port, store_url, rows, args.batch))
            assert count(engine, schema) == before + 3 * args.records, "every path landed every row"
        port.close()
        engine.dispose()

    kit = statistics.median(r["total"] for r in kit_runs)
    insert = statistics.median(insert_runs)
    copy = statistics.median(copy_runs)
    print(f"{args.records} records, batches of {args.batch}, kit store {args.store}, {args.repeat} round(s)")
    print(f"  direct bulk insert (executemany): {insert:7.3f} s  {args.records / insert:9,.0f} records/s")
    print(f"  direct COPY                     : {copy:7.3f} s  {args.records / copy:9,.0f} records/s")
    stage = statistics.median(r["stage"] for r in kit_runs)
    commit = statistics.median(r["commit"] for r in kit_runs)
    print(
        f"  through the kit                 : {kit:7.3f} s  {args.records / kit:9,.0f} records/s "
        f"(stage {stage:.3f} s, commit {commit:.3f} s)"
    )
    print(f"  ratio kit / bulk insert: {kit / insert:.2f}x (target <= 3x); kit / COPY: {kit / copy:.2f}x")
    summary = {
        "records": args.records,
        "batch": args.batch,
        "store": args.store,
        "kit_s": [round(r["total"], 4) for r in kit_runs],
        "kit_stage_s": [round(r["stage"], 4) for r in kit_runs],
        "kit_commit_s": [round(r["commit"], 4) for r in kit_runs],
        "insert_s": [round(t, 4) for t in insert_runs],
        "copy_s": [round(t, 4) for t in copy_runs],
        "ratio_vs_insert": round(kit / insert, 3),
        "ratio_vs_copy": round(kit / copy, 3),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
