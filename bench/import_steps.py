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
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from core_import import PRINCIPAL, build_kit
from harness import DEFAULT_POSTGRES_URL, fresh_database, simulator

sys.path.insert(0, str(Path(__file__).resolve().parent / "counting"))
from driver_counts import COUNTS, RECORDING, SEEN, install

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
    parser.add_argument("--show-sql", action="store_true", help="print the statements of the last import")
    args = parser.parse_args(argv)
    chunks = [[{"add": a, "i": i} for i in range(args.batch)] for a in range(args.adds)]
    spent: dict[str, list[float]] = {step: [] for step in STEPS}
    sent: dict[str, list[tuple[int, int]]] = {step: [] for step in STEPS}  # (statements, transactions)
    install()
    with (
        tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp,
        simulator(Path(tmp)) as address,
        fresh_database(args.db, Path(tmp), args.postgres_url) as url,
    ):
        kit = build_kit(url, address, args.batch)
        service = kit.service
        for n in range(args.imports + 3):
            RECORDING[0] = args.show_sql and n == args.imports + 2
            marks = [(cpu_seconds(), COUNTS["statements"], COUNTS["transactions"])]
            handle = service.begin(PRINCIPAL, "customers").handle
            marks.append((cpu_seconds(), COUNTS["statements"], COUNTS["transactions"]))
            for chunk in chunks:
                service.add(PRINCIPAL, handle, chunk)
            marks.append((cpu_seconds(), COUNTS["statements"], COUNTS["transactions"]))
            if RECORDING[0]:
                SEEN.append("--- commit")
            result = service.commit(PRINCIPAL, handle)
            marks.append((cpu_seconds(), COUNTS["statements"], COUNTS["transactions"]))
            if result.status.value != "committed":
                raise SystemExit(f"commit answered {result.status.value}")
            if n >= 3:  # the first three warm the caches and the pool
                for step, before, after in zip(STEPS, marks, marks[1:], strict=False):
                    spent[step].append(after[0] - before[0])
                    sent[step].append((after[1] - before[1], after[2] - before[2]))
        kit.close()
    for line in SEEN:
        print(line, file=sys.stderr)
    medians = {step: round(1000 * statistics.median(values), 2) for step, values in spent.items()}
    statements = {step: statistics.median(s for s, _ in v) for step, v in sent.items()}
    transactions = {step: statistics.median(t for _, t in v) for step, v in sent.items()}
    print(
        f"CPU ms per import step (median of {args.imports}), {args.db}, {args.adds} x {args.batch} records"
        + (" (statements and transactions on PostgreSQL's driver):" if args.db == "postgres" else ":")
    )
    for step in STEPS:
        print(f"  {step:<7}{medians[step]:>8.2f} ms {statements[step]:>5} stmts {transactions[step]:>4} tx")
    print(
        f"  {'all':<7}{sum(medians.values()):>8.2f} ms {sum(statements.values()):>5} stmts "
        f"{sum(transactions.values()):>4} tx"
    )
    summary = {"bench": "import_steps", "db": args.db, "cpu_ms": medians, "imports": args.imports}
    print(json.dumps(summary | {"statements": statements, "transactions": transactions}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
