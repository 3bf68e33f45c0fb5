"""How close the status read on PostgreSQL is to the driver's own floor (issue 15).

``get_import_status`` on PostgreSQL costs more than on SQLite because it waits for a round trip to
the database server. This measures, in one run and interleaved, on one idle event loop:

* **kit**: ``Store.import_with_operations_async`` (the read ``get_import_status`` awaits: psycopg-pool's
  async pool, the prepared statement, rows assembled into the kit's view);
* **driver**: the same SQL on one plain ``psycopg.AsyncConnection`` (autocommit, prepared), rows
  fetched and dropped: what any async PostgreSQL read costs on this machine, without the kit.

Per call: wall time and CPU time of this process. The difference between the two is all the kit
adds to the read; the rest of the status call's extra time over SQLite is the driver and the
database server (see bench/RESULTS.md, "The status read").

Usage::

    .venv/bin/python bench/status_floor.py [--calls 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_import import PRINCIPAL, build_kit, make_records
from harness import fresh_database, simulator

from adapter.store.driver import compiled_for
from adapter.store.notify import libpq_dsn
from adapter.store.reads import IMPORT_WITH_OPERATIONS


async def _timed(calls: int, read: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(wall us, CPU us) per call."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await read()
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


async def measure(url: str, address: tuple[str, int], calls: int, rounds: int) -> dict[str, object]:
    kit = build_kit(url, address, 100)
    handle = kit.service.begin(PRINCIPAL, "bench").handle
    kit.service.add(PRINCIPAL, handle, make_records(3))
    kit.service.commit(PRINCIPAL, handle)  # a status with one operation row besides the add
    digest = kit.service.ctx.codec.digest(handle)
    store = kit.service.ctx.store
    sql, _ = compiled_for(IMPORT_WITH_OPERATIONS, store.engine.dialect)
    results: dict[str, list[tuple[float, float]]] = {"kit": [], "driver": []}
    async with (
        store.async_reads(),
        await psycopg.AsyncConnection.connect(libpq_dsn(store.engine.url), autocommit=True) as connection,
    ):

        async def kit_read() -> object:
            return await store.import_with_operations_async(digest)

        async def driver_read() -> object:
            async with connection.cursor() as cursor:
                await cursor.execute(sql, {"digest": digest}, prepare=True)
                return await cursor.fetchall()

        assert await kit_read() is not None and await driver_read()
        for _ in range(rounds):
            results["kit"].append(await _timed(calls, kit_read))
            results["driver"].append(await _timed(calls, driver_read))
    kit.service.ctx.store.dispose()
    summary: dict[str, object] = {"calls": calls, "rounds": rounds}
    for name, samples in results.items():
        summary[name] = {
            "wall_us": round(statistics.median(w for w, _ in samples), 1),
            "cpu_us": round(statistics.median(c for _, c in samples), 1),
        }
    kit_wall = summary["kit"]["wall_us"]  # type: ignore[index]
    summary["kit_vs_driver_wall"] = round(kit_wall / summary["driver"]["wall_us"], 2)  # type: ignore[index]
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        simulator(Path(tmp)) as address,
        fresh_database("postgres", Path(tmp)) as url,
    ):
        summary = asyncio.run(measure(url, address, args.calls, args.rounds))
    for name in ("kit", "driver"):
        figures = summary[name]
        print(f"{name:7s} {figures['wall_us']:7.1f} us wall  {figures['cpu_us']:7.1f} us CPU per read")  # type: ignore[index]
    print(f"kit / driver, wall: {summary['kit_vs_driver_wall']}x")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
