"""Benchmark: the kit's durable import path against a direct import into the legacy system.

Two questions from the issue, answered on one machine in one run:

* **Overhead** - how much longer does ``ImportService`` (begin, stage every record durably, commit
  by replaying them into the legacy system) take than a plain ``LegacyClient`` import of the same
  records? Target: at most 1.5x.
* **Memory** (``--memory-only N``) - how much does *committing* an import of N staged records raise
  the process's peak RSS? Target: < 100 MB for 200,000 records.

The simulator always runs as a separate process over TCP (``python -m legacy_sim serve``), as in
production, so its own CPU and memory are not charged to the kit process being measured.

Usage::

    .venv/bin/python bench/core_import.py --records 20000 --batch 500 --db sqlite --repeat 3
    .venv/bin/python bench/core_import.py --db postgres
    .venv/bin/python bench/core_import.py --memory-only 200000

This is a benchmark, not a test: it prints a table and one JSON line (the last line of stdout).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import json
import platform
import pstats
import resource
import secrets
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import DEFAULT_POSTGRES_URL, UNMETERED, fresh_database, simulator

from adapter.bootstrap import Kit, build
from adapter.config import load_settings
from adapter.domain.identity import Principal
from adapter.legacy.simulator import SimulatorPort
from adapter.ports.legacy import LegacyPort
from adapter.services import ImportService
from adapter.services.commit import batch_ref_for
from legacy_sim.client import LegacyClient

REPO = Path(__file__).resolve().parents[1]
PRINCIPAL = Principal(subject="bench", tenant="bench")
LEGACY_TIMEOUT = 60.0  # generous: a 200k-record COMMIT is one long server-side transaction

Record = dict[str, Any]
Address = tuple[str, int]


# --- inputs ----------------------------------------------------------------------------------------


def make_records(count: int, start: int = 0) -> list[Record]:
    """Deterministic, realistic-looking rows (~120 bytes of JSON each), built outside any timing."""
    return [
        {
            "sku": f"SKU-{i:08d}",
            "name": f"Widget model {i % 977} rev {i % 13}",
            "qty": i % 250,
            "unit_price": round(1.5 + (i % 1000) * 0.37, 2),
            "warehouse": ("north", "south", "east", "west")[i % 4],
            "active": i % 7 != 0,
        }
        for i in range(start, start + count)
    ]


def batches(records: Sequence[Record], size: int) -> Iterator[Sequence[Record]]:
    for start in range(0, len(records), size):
        yield records[start : start + size]


# --- the simulator subprocess ----------------------------------------------------------------------


# --- the kit's database ----------------------------------------------------------------------------


@dataclass(slots=True)
class DatabaseFactory:
    """Hands out fresh, migrated, empty databases so every measured import starts from the same state."""

    kind: str
    workdir: Path
    postgres_url: str

    def fresh(self) -> contextlib.AbstractContextManager[str]:
        return fresh_database(self.kind, self.workdir, self.postgres_url)


def build_kit(url: str, address: Address, batch: int, records: int = 0) -> Kit:
    """Wire the service layer exactly as production does (``adapter.bootstrap.build``), over TCP.

    Going through ``build`` rather than hand-assembling a ServiceContext keeps the benchmark measuring
    what ships, whatever the context grows. Migration happened in ``DatabaseFactory.fresh``.
    """
    host, port = address
    settings = load_settings(
        database_url=url,
        legacy_url=f"tcp://{host}:{port}",
        legacy_timeout_seconds=LEGACY_TIMEOUT,
        secret=secrets.token_hex(32),  # never touch ./adapter.secret
        max_records_per_call=max(batch, 1000),
        # the quota's default (100,000 per import) would refuse the memory run's 200,000 records
        max_records_per_import=max(records, 100_000),
        **UNMETERED,
    )
    return build(settings)


# --- the two paths ---------------------------------------------------------------------------------


def stage(service: ImportService, records: Sequence[Record], batch: int) -> str:
    """begin + add in batches; returns the handle."""
    handle = service.begin(PRINCIPAL, "bench").handle
    for chunk in batches(records, batch):
        service.add(PRINCIPAL, handle, chunk)
    return handle


def commit_and_verify(kit: Kit, handle: str, expected: int) -> None:
    result = kit.service.commit(PRINCIPAL, handle)
    if result.status != "committed":
        raise RuntimeError(f"durable commit ended {result.status} ({result.error})")
    verify(kit.legacy, batch_ref_for(result.operation_id), expected)


def verify(legacy: LegacyPort, batch_ref: str, expected: int) -> None:
    """Ask the legacy system itself (STATUS) that exactly one batch of ``expected`` records landed."""
    status = legacy.batch_status(batch_ref)
    counts = [b.record_count for b in status.batches]
    if counts != [expected]:
        raise RuntimeError(f"legacy batch {batch_ref} holds {counts}, expected [{expected}]")


def run_durable(
    db: DatabaseFactory, address: Address, records: list[Record], batch: int
) -> tuple[float, float]:
    """(staging s, commit s) for begin + add* + commit through ImportService on a fresh database.

    Database creation and migration are not timed: they happen once per deployment, not per import.
    """
    with db.fresh() as url:
        kit = build_kit(url, address, batch)
        try:
            started = time.perf_counter()
            handle = stage(kit.service, records, batch)
            staged = time.perf_counter()
            result = kit.service.commit(PRINCIPAL, handle)
            finished = time.perf_counter()
            if result.status != "committed":
                raise RuntimeError(f"durable commit ended {result.status} ({result.error})")
            verify(kit.legacy, batch_ref_for(result.operation_id), len(records))
        finally:
            kit.close()
    return staged - started, finished - staged


def profile_durable(
    db: DatabaseFactory, address: Address, records: list[Record], batch: int, out: str
) -> None:
    """One extra, untimed durable import under cProfile: where the overhead goes."""
    profiler = cProfile.Profile()
    profiler.runcall(run_durable, db, address, records, batch)
    profiler.dump_stats(out)
    stats = pstats.Stats(profiler, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)


def run_direct(address: Address, records: list[Record], batch: int) -> float:
    """Seconds for the same import with the simulator's own client: what a user without the kit does."""
    batch_ref = f"direct-{secrets.token_hex(6)}"
    started = time.perf_counter()
    with LegacyClient(*address, timeout=LEGACY_TIMEOUT) as client:
        client.begin(batch_ref)
        for chunk in batches(records, batch):
            client.add_many(chunk)
        client.commit()
    elapsed = time.perf_counter() - started
    verify(SimulatorPort.tcp(*address, timeout=LEGACY_TIMEOUT), batch_ref, len(records))
    return elapsed


# --- overhead mode ---------------------------------------------------------------------------------


def overhead(args: argparse.Namespace, db: DatabaseFactory, address: Address) -> dict[str, Any]:
    """Alternate the paths (and which goes first) so drift in machine load hits both alike."""
    records = make_records(args.records)
    run_direct(address, records[: args.batch], args.batch)  # warm-up: imports, sockets, caches
    durable: list[float] = []
    direct: list[float] = []
    phases: list[tuple[float, float]] = []
    for round_no in range(args.repeat):
        steps = [("durable", durable), ("direct", direct)]
        for name, times in steps if round_no % 2 == 0 else reversed(steps):
            if name == "durable":
                staging_s, commit_s = run_durable(db, address, records, args.batch)
                phases.append((staging_s, commit_s))
                times.append(staging_s + commit_s)
            else:
                times.append(run_direct(address, records, args.batch))
            print(f"  round {round_no + 1}: {name:<7} {times[-1]:7.3f} s", file=sys.stderr)
    if args.profile:
        profile_durable(db, address, records, args.batch, args.profile)
    result = summarize(args, durable, direct)
    result["durable_stage_s"] = [round(p[0], 4) for p in phases]
    result["durable_commit_s"] = [round(p[1], 4) for p in phases]
    return result


def summarize(args: argparse.Namespace, durable: list[float], direct: list[float]) -> dict[str, Any]:
    med_durable, med_direct = statistics.median(durable), statistics.median(direct)
    return {
        "mode": "overhead",
        "db": args.db,
        "records": args.records,
        "batch": args.batch,
        "repeat": args.repeat,
        "durable_s": [round(t, 4) for t in durable],
        "direct_s": [round(t, 4) for t in direct],
        "durable_rps": round(args.records / med_durable),
        "direct_rps": round(args.records / med_direct),
        "ratio": round(med_durable / med_direct, 3),
        "ratio_per_round": [round(a / b, 3) for a, b in zip(durable, direct, strict=True)],
        "target_ratio": 1.5,
        "ok": med_durable / med_direct <= 1.5,
    }


def print_overhead(result: dict[str, Any]) -> None:
    print(f"{'path':<9}{'median s':>10}{'records/s':>12}   runs (s)")
    for name in ("durable", "direct"):
        runs = ", ".join(f"{t:.3f}" for t in result[f"{name}_s"])
        median = statistics.median(result[f"{name}_s"])
        print(f"{name:<9}{median:>10.3f}{result[f'{name}_rps']:>12,}   {runs}")
    stage_s, commit_s = (statistics.median(result[f"durable_{p}_s"]) for p in ("stage", "commit"))
    print(f"durable phases (median s): staging {stage_s:.3f}, commit/replay {commit_s:.3f}")
    verdict = "OK" if result["ok"] else "MISSED"
    print(f"ratio durable/direct (median times): {result['ratio']:.2f}x  (target <= 1.5x: {verdict})")


# --- memory mode -----------------------------------------------------------------------------------


def current_rss_kib() -> int:
    """Current resident set (VmRSS, KiB): the floor the commit starts from, unlike the high-water mark."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def memory(args: argparse.Namespace, db: DatabaseFactory, address: Address) -> dict[str, Any]:
    """Peak-RSS rise of one commit of N staged records; then, separately, tracemalloc's peak.

    ru_maxrss is a high-water mark: it never goes down. Staging runs first and finishes, so reading
    it right before ``commit`` and right after leaves only the commit able to raise it. That rise
    can understate if an earlier peak sat above the RSS the commit starts from, so the upper bound
    (ru_maxrss after - VmRSS before) is reported too and is what the target is checked against.
    tracemalloc runs on a second import so its own bookkeeping cannot inflate the RSS figures.
    """
    n, batch = args.memory_only, args.batch
    with db.fresh() as url:
        kit = build_kit(url, address, batch, records=n)
        try:
            handle = stage_generated(kit.service, n, batch)
            gc.collect()
            before_rss = current_rss_kib()
            before_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            started = time.perf_counter()
            commit_and_verify(kit, handle, n)
            commit_s = time.perf_counter() - started
            after_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            traced_peak = None if args.no_tracemalloc else traced_commit_peak(kit, n, batch)
        finally:
            kit.close()
    return {
        "mode": "memory",
        "db": args.db,
        "records": n,
        "batch": batch,
        "commit_s": round(commit_s, 3),
        "ru_maxrss_before_kib": before_max,
        "ru_maxrss_after_kib": after_max,
        "vmrss_before_commit_kib": before_rss,
        "peak_rise_mib": round((after_max - before_max) / 1024, 1),
        "peak_rise_upper_bound_mib": round((after_max - min(before_rss, before_max)) / 1024, 1),
        "tracemalloc_commit_peak_mib": traced_peak,
        "target_mib": 100,
        "ok": (after_max - min(before_rss, before_max)) / 1024 < 100,
    }


def stage_generated(service: ImportService, n: int, batch: int) -> str:
    """Stage N records built one batch at a time.

    Building all N up front would set a high-water mark (~90 MB for 200k dicts) that the commit
    could hide under; generated per batch, staging's peak stays near the process's steady RSS.
    """
    handle = service.begin(PRINCIPAL, "bench").handle
    for start in range(0, n, batch):
        service.add(PRINCIPAL, handle, make_records(min(batch, n - start), start))
    return handle


def traced_commit_peak(kit: Kit, n: int, batch: int) -> float:
    """Peak Python-heap growth (MiB) during the commit of a second, identical import."""
    handle = stage_generated(kit.service, n, batch)
    gc.collect()
    tracemalloc.start()
    try:
        commit_and_verify(kit, handle, n)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return round(peak / (1024 * 1024), 1)


def print_memory(result: dict[str, Any]) -> None:
    print(f"commit of {result['records']:,} staged records ({result['db']}): {result['commit_s']:.2f} s")
    print(f"  ru_maxrss before commit : {result['ru_maxrss_before_kib']:>10,} KiB")
    print(f"  ru_maxrss after commit  : {result['ru_maxrss_after_kib']:>10,} KiB")
    print(f"  VmRSS before commit     : {result['vmrss_before_commit_kib']:>10,} KiB")
    print(f"  peak rise (hi-water)    : {result['peak_rise_mib']:>10.1f} MiB")
    bound = result["peak_rise_upper_bound_mib"]
    print(f"  peak rise upper bound   : {bound:>10.1f} MiB  (ru_maxrss after - VmRSS before)")
    if result["tracemalloc_commit_peak_mib"] is not None:
        print(f"  tracemalloc commit peak : {result['tracemalloc_commit_peak_mib']:>10.1f} MiB")
    print(f"  target < 100 MB: {'OK' if result['ok'] else 'MISSED'}")


# --- entry point -----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="records per import (overhead mode)")
    parser.add_argument("--batch", type=int, default=500, help="records per add / add_many call")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds of both paths")
    parser.add_argument("--memory-only", type=int, metavar="N", help="stage N records, measure the commit")
    parser.add_argument("--profile", metavar="FILE", help="overhead mode: cProfile one extra durable run")
    parser.add_argument("--no-tracemalloc", action="store_true", help="memory mode: skip the traced commit")
    args = parser.parse_args(argv)
    if min(args.records, args.batch, args.repeat, args.memory_only or 1) < 1:
        parser.error("--records, --batch, --repeat and --memory-only must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-core-import-") as tmp:
        workdir = Path(tmp)
        db = DatabaseFactory(args.db, workdir, args.postgres_url)
        with simulator(workdir) as address:
            if args.memory_only:
                result = memory(args, db, address)
                print_memory(result)
            else:
                result = overhead(args, db, address)
                print_overhead(result)
    result["python"] = platform.python_version()
    result["date"] = time.strftime("%Y-%m-%d")
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
