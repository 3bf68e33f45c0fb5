"""CPU per step of one load-shaped import, in process: begin, the adds, commit (the service layer
only, no HTTP), on PostgreSQL or SQLite, with the simulator over TCP.

The load benchmark (``bench/load.py``) shows what an import costs the server under load, HTTP and
event loop included; this shows the service layer's share of it, step by step, without the noise
of 32 clients. CPU is this process's (``getrusage``: every thread, so the commit's read-ahead too)
and, on PostgreSQL on this machine, its backends' (by ``application_name``, summed over the measured
imports: ``/proc`` counts in ticks of 10 ms).

Usage::

    .venv/bin/python bench/import_steps.py --imports 20 --db postgres
    .venv/bin/python bench/import_steps.py --imports 20 --db postgres --record-bytes 300  # 30 KB adds

Prints a table and one JSON line (the last line of stdout).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import psycopg
from core_import import PRINCIPAL, build_kit
from harness import DEFAULT_POSTGRES_URL, backend_seconds, fresh_database, simulator

sys.path.insert(0, str(Path(__file__).resolve().parent / "counting"))
from driver_counts import COUNTS, RECORDING, SEEN, install

STEPS = ("begin", "adds", "commit")
APPLICATION_NAME = f"bench-steps-{os.getpid()}"


class BackendCPU:
    """The kit's own PostgreSQL backends' CPU, summed per step over the measured imports."""

    def __init__(self, postgres_url: str) -> None:
        dsn = postgres_url.replace("postgresql+psycopg://", "postgresql://")
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._last: dict[int, float] = {}
        self.spent = dict.fromkeys(STEPS, 0.0)

    def sample(self, step: str | None) -> None:
        """Charge what the backends used since the last sample to ``step`` (None: to nothing)."""
        now = backend_seconds(self._conn, APPLICATION_NAME)
        if step is not None:
            self.spent[step] += sum(seconds - self._last.get(pid, 0.0) for pid, seconds in now.items())
        self._last = now


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", type=int, default=20, help="measured imports (after 3 warm-up ones)")
    parser.add_argument("--adds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument(
        "--record-bytes", type=int, default=0, help="pad each record with a text of this many characters"
    )
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--show-sql", action="store_true", help="print the statements of the last import")
    args = parser.parse_args(argv)
    pad = {"note": "x" * args.record_bytes} if args.record_bytes else {}
    chunks = [[{"add": a, "i": i} | pad for i in range(args.batch)] for a in range(args.adds)]
    spent: dict[str, list[float]] = {step: [] for step in STEPS}
    sent: dict[str, list[tuple[int, int]]] = {step: [] for step in STEPS}  # (statements, transactions)
    install()
    with (
        tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp,
        simulator(Path(tmp)) as address,
        fresh_database(args.db, Path(tmp), args.postgres_url) as url,
    ):
        postgres = args.db == "postgres"
        named = f"{url}&application_name={APPLICATION_NAME}" if postgres else url
        kit = build_kit(named, address, args.batch)
        service = kit.service
        backends = BackendCPU(args.postgres_url) if postgres else None

        asked = {"statements": 0, "transactions": 0}  # the samples' own, not the kit's

        def mark(marks: list[tuple[float, int, int]], step: str | None, measured: bool) -> None:
            if backends is not None and measured:
                before = dict(COUNTS)
                backends.sample(step)  # first: asking costs this process CPU too
                for key in asked:
                    asked[key] += COUNTS[key] - before[key]
            counts = [COUNTS[key] - asked[key] for key in ("statements", "transactions")]
            marks.append((cpu_seconds(), *counts))

        for n in range(args.imports + 3):
            measured = n >= 3  # the first three warm the caches and the pool
            RECORDING[0] = args.show_sql and n == args.imports + 2
            marks: list[tuple[float, int, int]] = []
            mark(marks, None, measured)
            handle = service.begin(PRINCIPAL, "customers").handle
            mark(marks, "begin", measured)
            for chunk in chunks:
                service.add(PRINCIPAL, handle, chunk)
            mark(marks, "adds", measured)
            if RECORDING[0]:
                SEEN.append("--- commit")
            result = service.commit(PRINCIPAL, handle)
            mark(marks, "commit", measured)
            if result.status.value != "committed":
                raise SystemExit(f"commit answered {result.status.value}")
            if measured:
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
    spent_by_database = backends.spent if backends is not None else {}
    database = {step: round(1000 * s / args.imports, 2) for step, s in spent_by_database.items()}
    for step in STEPS:
        row = f"  {step:<7}{medians[step]:>8.2f} ms {statements[step]:>5} stmts {transactions[step]:>4} tx"
        print(row + (f"  PostgreSQL {database[step]:>6.2f} ms" if database else ""))
    row = f"  {'all':<7}{sum(medians.values()):>8.2f} ms {sum(statements.values()):>5} stmts "
    row += f"{sum(transactions.values()):>4} tx"
    print(row + (f"  PostgreSQL {sum(database.values()):>6.2f} ms (mean)" if database else ""))
    summary = {"bench": "import_steps", "db": args.db, "cpu_ms": medians, "imports": args.imports}
    summary |= {"statements": statements, "transactions": transactions, "postgres_cpu_ms": database or None}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
