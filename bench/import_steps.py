"""CPU per step of one load-shaped import, in process: begin, the adds, commit (the service layer
only, no HTTP), on PostgreSQL or SQLite, with the simulator over TCP.

The load benchmark (``bench/load.py``) shows what an import costs the server under load, HTTP and
event loop included; this shows the service layer's share of it, step by step, without the noise
of 32 clients. CPU is this process's (``getrusage``: every thread, so the commit's read-ahead too).

Usage::

    .venv/bin/python bench/import_steps.py --imports 20 --db postgres

Prints a table and one JSON line (the last line of stdout).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from core_import import PRINCIPAL, build_kit
from harness import DEFAULT_POSTGRES_URL, fresh_database, simulator

STEPS = ("begin", "adds", "commit")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", type=int, default=20, help="measured imports (after 3 warm-up ones)")
    parser.add_argument("--adds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    args = parser.parse_args(argv)
    chunks = [[{"add": a, "i": i} for i in range(args.batch)] for a in range(args.adds)]
    spent: dict[str, list[float]] = {step: [] for step in STEPS}
    with (
        tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp,
        simulator(Path(tmp)) as address,
        fresh_database(args.db, Path(tmp), args.postgres_url) as url,
    ):
        kit = build_kit(url, address, args.batch)
        service = kit.service
        for n in range(args.imports + 3):
            started = cpu_seconds()
            handle = service.begin(PRINCIPAL, "customers").handle
            begun = cpu_seconds()
            for chunk in chunks:
                service.add(PRINCIPAL, handle, chunk)
            added = cpu_seconds()
            result = service.commit(PRINCIPAL, handle)
            committed = cpu_seconds()
            if result.status.value != "committed":
                raise SystemExit(f"commit answered {result.status.value}")
            if n >= 3:  # the first three warm the caches and the pool
                used = (begun - started, added - begun, committed - added)
                for step, seconds in zip(STEPS, used, strict=True):
                    spent[step].append(seconds)
        kit.close()
    medians = {step: round(1000 * statistics.median(values), 2) for step, values in spent.items()}
    print(
        f"CPU ms per import step (median of {args.imports}), {args.db}, {args.adds} x {args.batch} records:"
    )
    for step in STEPS:
        print(f"  {step:<7}{medians[step]:>8.2f}")
    print(f"  {'all':<7}{sum(medians.values()):>8.2f}")
    print(json.dumps({"bench": "import_steps", "db": args.db, "cpu_ms": medians, "imports": args.imports}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
