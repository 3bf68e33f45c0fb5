"""Benchmark: where the server's time goes per record of an ``add_records`` call, stage by stage.

``bench/mcp_calls.py --only add_records`` gives the figure over HTTP; this script times each stage of
the server's work on the same 500-record batch in one process, on a fresh database, so the stages
can be compared inside one run:

* **parsing** (the SDK, not the kit): ``json.loads`` of the HTTP body, ``JSONRPCRequest`` and
  ``CallToolRequestParams`` validation (what the SDK does before our handler), then our
  ``AddRecordsIn`` input model;
* **encoding**: ``encode_batch`` (each record's compact JSON, its size, the content digest);
* **fingerprint**: the idempotency fingerprint of the request (over the content digest);
* **validation**: ``TargetRules.check`` against the bench's typed target (``BenchItem``);
* **insert**: the records alone, through ``StagingRepository.stage`` in a transaction
  (``executemany`` on SQLite, one binary text array on PostgreSQL), including the COMMIT;
* **whole service call**: ``ImportService.add`` (all of the above but parsing, plus the import
  row, the quota reads, the operation, the events): the remainder is the per-call fixed cost.

Usage::

    .venv/bin/python bench/add_breakdown.py [--db postgres] [--batch 500] [--calls 40]

It prints a table and one JSON line (microseconds per record).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core_import import make_records
from harness import DEFAULT_POSTGRES_URL, UNMETERED, fresh_database
from mcp_calls import ITEMS, TypedTargets
from mcp_types import CallToolRequestParams, JSONRPCRequest

from adapter.bootstrap import build, build_legacy_port
from adapter.config import load_settings
from adapter.domain.identity import Principal, fingerprint
from adapter.domain.records import encode_batch
from adapter.entrypoints.mcp.schemas import AddRecordsIn

PRINCIPAL = Principal(subject="bench", tenant="bench")


def per_record(fn: Callable[[int], Any], calls: int, batch: int) -> float:
    """Microseconds per record of ``fn(i)`` over ``calls`` calls (after one warm-up call)."""
    fn(-1)
    started = time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.perf_counter() - started) / calls / batch * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--calls", type=int, default=40)
    args = p.parse_args()
    n, calls = args.batch, args.calls
    batches = [make_records(n, start=i * n) for i in range(calls + 2)]
    bodies = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "add_records", "arguments": {"handle": "imp_" + "x" * 32, "records": b}},
            }
        ).encode()
        for i, b in enumerate(batches)
    ]

    def parse(i: int) -> None:
        request = JSONRPCRequest.model_validate(json.loads(bodies[i]))
        params = CallToolRequestParams.model_validate(request.params, by_name=False)
        AddRecordsIn.model_validate(params.arguments)

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, fresh_database(args.db, Path(tmp), args.postgres_url) as url:
        settings = load_settings(
            database_url=url,
            legacy_url="embedded",
            legacy_db=str(Path(tmp) / "legacy.db"),
            secret=secrets.token_hex(32),
            secret_file=str(Path(tmp) / "unused.secret"),
            max_records_per_call=max(n, 1000),
            **UNMETERED,
        )
        kit = build(settings, legacy=TypedTargets(build_legacy_port(settings), schema=True))
        try:
            ctx = kit.service.ctx
            encoded = [encode_batch(b, ctx.limits) for b in batches]
            target = ctx.targets.require(ITEMS)
            figures["parsing (SDK + input model)"] = per_record(parse, calls, n)
            figures["encoding"] = per_record(lambda i: encode_batch(batches[i], ctx.limits), calls, n)
            figures["fingerprint"] = per_record(
                lambda i: fingerprint("add", {"handle": "d", "records": encoded[i].content_digest, "n": n}),
                calls,
                n,
            )
            figures["validation (typed schema)"] = per_record(lambda i: target.check(batches[i]), calls, n)

            import_id = kit.service.begin(PRINCIPAL, ITEMS).import_id  # records need an import (FK)

            def insert(i: int) -> None:
                with ctx.store.unit_of_work() as uow:
                    uow.staging.stage(import_id, (i + 1) * n + 1, encoded[i].texts)
                    uow.commit()

            figures["insert (records only, with COMMIT)"] = per_record(insert, calls, n)
            handle = kit.service.begin(PRINCIPAL, ITEMS).handle
            figures["whole service call (ImportService.add)"] = per_record(
                lambda i: kit.service.add(PRINCIPAL, handle, batches[i]), calls, n
            )
        finally:
            kit.close()
    parts = sum(v for k, v in figures.items() if not k.startswith(("whole", "parsing")))
    figures["fixed per call, spread over the records (whole - parts)"] = (
        figures["whole service call (ImportService.add)"] - parts
    )
    print(f"db={args.db}, {n} records per call, {calls} calls, load {os.getloadavg()[0]:.2f}")
    for name, micros in figures.items():
        print(f"  {name:<58} {micros:6.2f} us/record  ({micros * n / 1000:6.2f} ms/call)")
    print(json.dumps({"db": args.db, "batch": n, **{k: round(v, 2) for k, v in figures.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
