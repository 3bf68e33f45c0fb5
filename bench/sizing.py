"""Sizing (issue 25, ``docs/deployment.md`` section 5): the CPU an import of a given size costs a
worker and PostgreSQL, and the cores 100 imports a second of it need.

An import's CPU has three parts: its begin and commit (a commit claims, replays to the legacy system
and finishes: it costs more than an add), its ``add_records`` calls (each a request and a round trip
to the database), and its records (validated, compressed, staged, replayed). This runs
``bench/load.py`` (the naive wrapper and one worker) once per import shape (``--shape ADDSxBATCH``:
``ADDS`` calls of ``add_records`` with ``BATCH`` records each) and fits, per role, by least squares::

    CPU ms per import = per_import + per_add x adds + per_record x records

At least three shapes, which must tell the three terms apart (two of one number of adds with
different batches, and one with another number of adds). It prints the terms for the worker
(``server``) and PostgreSQL, each shape's measured and fitted figures, and the cores 100 imports a
second of ``--for ADDSxBATCH`` need; and the naive wrapper's CPU per import at the first shape,
which says how fast this machine is against another where the same command ran (the figures scale
with it). The records are the bench's own (three small fields); larger records cost more each.

Any other argument goes to ``bench/load.py`` (``--clients``, ``--seconds``, ``--rounds``,
``--embedded-postgres``, ``--postgres-cpus``, ``--cpus``)::

    .venv/bin/python bench/sizing.py --shape 10x100 --shape 4x250 --shape 10x1000 --for 10x100 \\
        --embedded-postgres --postgres-cpus 1 --cpus 0 --clients 8 --seconds 8 --rounds 3

Prints a table and one JSON line (the last line of stdout).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOAD = Path(__file__).resolve().parent / "load.py"
ROLES = ("server", "postgres")
"""What is sized: the worker processes and the kit's own PostgreSQL backends (the legacy system's
own cost is not the kit's)."""
TERMS = ("per_import", "per_add", "per_record")


@dataclass(frozen=True)
class Shape:
    """An import: a begin, ``adds`` calls of ``add_records`` with ``batch`` records each, a commit."""

    adds: int
    batch: int

    @property
    def records(self) -> int:
        return self.adds * self.batch

    @property
    def terms(self) -> tuple[int, int, int]:
        """How many of each :data:`TERMS` the import holds."""
        return 1, self.adds, self.records

    def __str__(self) -> str:
        return f"{self.adds}x{self.batch}"


@dataclass(frozen=True)
class Cost:
    """CPU milliseconds per import, per add and per record, as fitted."""

    per_import: float
    per_add: float
    per_record: float

    def ms(self, shape: Shape) -> float:
        return sum(
            c * n for c, n in zip((self.per_import, self.per_add, self.per_record), shape.terms, strict=True)
        )

    def cores(self, shape: Shape, imports_per_s: float = 100.0) -> float:
        return self.ms(shape) * imports_per_s / 1000


def fit(points: Sequence[tuple[Shape, float]]) -> Cost:
    """The three terms from (shape, CPU ms per import) points, by least squares: a QR decomposition
    (modified Gram-Schmidt) of the columns scaled to at most 1 (an import counts 1, its records
    thousands). ``ValueError`` where the shapes cannot tell the terms apart: a column that is,
    within rounding, a mix of those before it."""
    scales = [max(shape.terms[i] for shape, _ in points) for i in range(3)]
    columns = [[shape.terms[i] / scales[i] for shape, _ in points] for i in range(3)]
    q: list[list[float]] = []
    r = [[0.0] * 3 for _ in range(3)]
    for j, column in enumerate(columns):
        v = list(column)
        for i, qi in enumerate(q):
            r[i][j] = _dot(qi, v)
            v = [a - r[i][j] * b for a, b in zip(v, qi, strict=True)]
        r[j][j] = _dot(v, v) ** 0.5
        if r[j][j] <= 1e-9 * _dot(column, column) ** 0.5:
            raise ValueError("the shapes cannot tell per import, per add and per record apart")
        q.append([a / r[j][j] for a in v])
    qty = [_dot(qi, [ms for _, ms in points]) for qi in q]
    solved = [0.0] * 3
    for i in reversed(range(3)):  # R x = Q^T y, R upper triangular
        solved[i] = (qty[i] - sum(r[i][k] * solved[k] for k in range(i + 1, 3))) / r[i][i]
    return Cost(*(term / scale for term, scale in zip(solved, scales, strict=True)))


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def run_load(shape: Shape, passed: Sequence[str]) -> dict[str, Any]:
    """One ``bench/load.py`` run of the naive wrapper and one worker at ``shape``: its JSON line."""
    command = [sys.executable, str(LOAD), "--only", "naive", "--only", "kit_x1"]
    command += ["--adds", str(shape.adds), "--batch", str(shape.batch), *passed]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    print(done.stdout, file=sys.stderr, end="")  # load.py's own table, for the reader
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"bench/load.py failed at {shape} (exit {done.returncode})")
    return dict(json.loads(lines[-1]))


def sizing(runs: dict[Shape, dict[str, Any]], target: Shape) -> dict[str, Any]:
    """The fitted terms of each role and the cores 100 imports a second of ``target`` need, from
    ``bench/load.py``'s JSON line per shape."""
    measured = {shape: _cpu_ms_per_import(run) for shape, run in runs.items()}
    costs = {role: fit([(shape, ms[role]) for shape, ms in measured.items()]) for role in ROLES}
    first = next(iter(runs.values()))
    return {
        "bench": "sizing",
        "shapes": [
            {"adds": shape.adds, "batch": shape.batch, **ms}
            | {f"{role}_fitted": round(cost.ms(shape), 2) for role, cost in costs.items()}
            for shape, ms in measured.items()
        ],
        **{term: {role: round(getattr(cost, term), 6) for role, cost in costs.items()} for term in TERMS},
        "for": {"adds": target.adds, "batch": target.batch},
        "cores_per_100_imports_per_s": {role: round(cost.cores(target), 2) for role, cost in costs.items()},
        "naive_ms_per_import": first["results"]["naive"]["cpu_ms_per_import"]["server"],
        "clients": first["clients"],
        "postgres": first["postgres"],
    }


def _cpu_ms_per_import(run: dict[str, Any]) -> dict[str, float]:
    """One run's CPU per import: the worker's and PostgreSQL's, and the naive wrapper's server."""
    kit = run["results"]["kit_x1"]["cpu_ms_per_import"]
    return {role: kit[role] for role in ROLES} | {
        "naive": run["results"]["naive"]["cpu_ms_per_import"]["server"]
    }


def shape_argument(text: str) -> Shape:
    adds, _, batch = text.partition("x")
    try:
        shape = Shape(int(adds), int(batch))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: ADDSxBATCH, two whole numbers, as 10x100") from None
    if shape.adds < 1 or shape.batch < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one add of one record")
    return shape


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="Other arguments go to bench/load.py."
    )
    parser.add_argument("--shape", type=shape_argument, action="append", help="ADDSxBATCH (three or more)")
    parser.add_argument(
        "--for", dest="target", type=shape_argument, default=Shape(10, 100), help="ADDSxBATCH to size for"
    )
    args, passed = parser.parse_known_args(argv)
    shapes = list(dict.fromkeys(args.shape or [Shape(10, 100), Shape(4, 250), Shape(10, 1000)]))
    try:
        fit([(shape, 0.0) for shape in shapes])  # before anything runs: can these shapes be told apart?
    except ValueError as exc:
        parser.error(f"{exc}: give three or more --shape, two of one number of adds and another")
    if {"--only", "--adds", "--batch"} & {a.split("=")[0] for a in passed}:
        parser.error("--only, --adds and --batch are this bench's own (--shape)")
    summary = sizing({shape: run_load(shape, passed) for shape in shapes}, args.target)
    print_table(summary)
    print(json.dumps(summary))
    return 0


def print_table(s: dict[str, Any]) -> None:
    print(f"sizing: {s['clients']} clients; CPU ms per import: the worker, PostgreSQL, the naive wrapper")
    columns = ("worker (fitted)", 20), ("PostgreSQL (fitted)", 22), ("naive", 9)
    print("shape".ljust(10) + "".join(name.rjust(width) for name, width in columns))
    for shape in s["shapes"]:
        worker = f"{shape['server']} ({shape['server_fitted']})"
        postgres = f"{shape['postgres']} ({shape['postgres_fitted']})"
        label = f"{shape['adds']}x{shape['batch']}"
        print(f"{label:<10}{worker:>20}{postgres:>22}{shape['naive']:>9}")
    target = f"{s['for']['adds']}x{s['for']['batch']}"
    for role, name in (("server", "worker"), ("postgres", "PostgreSQL")):
        print(
            f"{name}: {s['per_import'][role]} ms an import + {s['per_add'][role]} ms an add"
            f" + {s['per_record'][role]} ms a record; 100 imports/s of {target}: "
            f"{s['cores_per_100_imports_per_s'][role]} cores"
        )


if __name__ == "__main__":
    sys.exit(main())
