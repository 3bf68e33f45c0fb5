"""Benchmark: PostgreSQL's CPU per ``add_records`` as the tenant holds more imports (issue 25).

A tenant holds the staged bytes of its open imports and of its committed ones until the purge,
``ADAPTER_RETENTION_DAYS`` later; each add checks that total against its quota. For each count in
``--held``, on a fresh PostgreSQL schema: that many committed imports of the tenant holding bytes
(one ``INSERT ... SELECT``, then ``ANALYZE``), then ``--adds`` adds of ``--batch`` records,
``--adds-per-import`` to each of a series of open imports, through ``Store.add_if_allowed`` (the add
as one statement, as a worker runs it), on one pooled connection. Maintenance's fold of the
held-bytes changes runs every ``--fold-every`` adds on the same connection and its cost is counted.
Measured: the backend's CPU (``/proc``) per add, and the wall time.

It also runs on a checkout from before migration ``0012`` (no fold there; the add summed the
tenant's holding imports), which is how ``bench/RESULTS.md`` compares the two.

Usage::

    .venv/bin/python bench/held_bytes.py [--held 0 1000 5000 50000] [--adds 2000]

Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import inspect, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import DEFAULT_POSTGRES_URL, backend_seconds, fresh_database

from adapter.store import Store
from adapter.store.staging import AddAhead, AddLimits

APPLICATION_NAME = "bench-held-bytes"
TENANT = "bench"

_FILL = """
INSERT INTO imports (id, handle_digest, principal, tenant, target, state, record_count, staged_bytes,
                     revision, legacy_batch_id, expires_at, created_at, updated_at, version)
SELECT 'h' || n, 'dh' || n, 'p', :tenant, 'customers', 'committed', 100, 7000,
       0, 'B' || n, :at, :at, :at, 5
FROM generate_series(1, :held) AS n
"""
_OPEN = """
INSERT INTO imports (id, handle_digest, principal, tenant, target, state, record_count, staged_bytes,
                     revision, expires_at, created_at, updated_at, version)
SELECT 'o' || n, 'do' || n, 'p', :tenant, 'customers', 'open', 0, 0, 0, :until, :at, :at, 1
FROM generate_series(1, :n) AS n
"""


def _fold(store: Store) -> None:
    """Maintenance's fold, where the store has one (migration 0012 and later)."""
    if inspect(store.engine).has_table("held_bytes_changes"):
        from adapter.store.held_bytes import fold_held_bytes

        with store.unit_of_work() as uow:
            fold_held_bytes(uow.session)
            uow.commit()


def _prepare(store: Store, held: int, opened: int) -> list[str]:
    """The tenant's ``held`` committed imports and ``opened`` open ones; the open ones' digests."""
    now = datetime.now(UTC).replace(tzinfo=None)
    with store.engine.begin() as connection:
        connection.execute(text(_FILL), {"tenant": TENANT, "at": now, "held": held})
        connection.execute(
            text(_OPEN), {"tenant": TENANT, "at": now, "until": now + timedelta(days=1), "n": opened}
        )
    _fold(store)
    with store.engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
    return [f"do{n}" for n in range(1, opened + 1)]


def _ahead(texts: list[str]) -> AddAhead:
    return AddAhead(
        operation_id=secrets.token_hex(16),
        kind="add",
        principal="p",
        key=None,
        fingerprint="f",
        status="succeeded",
        staged_event=("import.records_staged", "open"),
        done_event=("operation.succeeded", "succeeded", {"kind": "add"}),
        texts=texts,
    )


def measure(url: str, held: int, args: argparse.Namespace) -> dict[str, Any]:
    store = Store.from_url(f"{url}&application_name={APPLICATION_NAME}", pool_size=1, max_overflow=0)
    try:
        digests = _prepare(store, held, -(-args.adds // args.adds_per_import))
        texts = [
            json.dumps({"id": str(i), "name": f"customer {i}", "city": "Berlin"}) for i in range(args.batch)
        ]
        size = sum(len(t.encode()) for t in texts)
        limits = AddLimits(
            valid_at=datetime.now(UTC),
            open_state="open",
            max_records=10**9,
            max_bytes=10**12,
            max_tenant_bytes=10**15,
        )
        # The store's one connection is its backend; the probe is a connection of its own.
        with psycopg.connect(args.postgres_url.replace("+psycopg", "")) as probe:
            before = backend_seconds(probe, APPLICATION_NAME)
            started = time.perf_counter()
            for n in range(1, args.adds + 1):
                digest = digests[(n - 1) // args.adds_per_import]
                if store.add_if_allowed(digest, TENANT, args.batch, size, _ahead(texts), limits) is None:
                    raise RuntimeError("an add was refused")
                if n % args.fold_every == 0:
                    _fold(store)
            wall = time.perf_counter() - started
            after = backend_seconds(probe, APPLICATION_NAME)
        cpu = sum(after[pid] - before.get(pid, 0.0) for pid in after)
        return {
            "held": held,
            "postgres_cpu_ms_per_add": round(1000 * cpu / args.adds, 3),
            "wall_ms_per_add": round(1000 * wall / args.adds, 3),
        }
    finally:
        store.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=int, nargs="+", default=[0, 1000, 5000, 50000])
    parser.add_argument("--adds", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--adds-per-import", type=int, default=10)
    parser.add_argument("--fold-every", type=int, default=250)
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-held-") as tmp:
        for held in args.held:
            with fresh_database("postgres", Path(tmp), args.postgres_url) as url:
                results.append(measure(url, held, args))
                row = results[-1]
                print(
                    f"held {held:>7,}: PostgreSQL {row['postgres_cpu_ms_per_add']:.3f} ms CPU an add, "
                    f"wall {row['wall_ms_per_add']:.3f} ms",
                    file=sys.stderr,
                )
    print(json.dumps({"bench": "held_bytes", "adds": args.adds, "batch": args.batch, "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
