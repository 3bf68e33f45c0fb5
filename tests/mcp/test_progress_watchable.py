"""Progress a person can watch, over real HTTP with the SDK client and a slow simulator over TCP."""

from __future__ import annotations

import itertools
import time
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio


async def test_a_slow_legacy_system_still_shows_progress_every_second_from_zero_to_the_total(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    records = make_records(12)
    seen: list[tuple[float, float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((time.monotonic(), progress, total, message))

    async with server.client() as client:
        handle = await server.stage(client, records)
        legacy_engine.update_faults(latency_ms=200)  # 200 ms per legacy command, so per record
        started = time.monotonic()
        result = await client.call_tool("commit_import", {"handle": handle}, progress_callback=on_progress)
        ended = time.monotonic()
        seen_at_result = list(seen)
    assert server.structured(result)["status"] == "committed"
    values = [p for _, p, _, _ in seen]
    assert values[0] == 0 and seen[0][3] == "0 of 12 records sent"
    assert values == sorted(set(values)), "strictly increasing"
    assert values[-1] == 12 and seen[-1][3] == "12 of 12 records sent"
    assert {total for _, _, total, _ in seen} == {12}
    assert seen_at_result == seen, "the last progress came before the result"
    # The one chunk of 12 records takes about 2.4 s in the legacy system: never a silent second. It
    # goes in pieces of about a quarter second (here one or two records), each counted as it lands.
    times = [started, *(at for at, _, _, _ in seen), ended]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert ended - started > 2.4
    assert max(gaps) < 1.0, gaps
    counts = sorted({int(p) for _, p, _, _ in seen})
    assert len(counts) >= 7, f"the records were counted piece by piece, not per chunk: {counts}"
    pulses = [(p, m) for _, p, _, m in seen if p != int(p)]
    assert all(
        m and m.startswith(f"{int(p)} of 12 records sent; the legacy system is working") and p < 12
        for p, m in pulses
    )


async def test_two_parallel_commits_each_get_only_their_own_progress(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    sizes = {"big": 1300, "small": 700}
    seen: dict[str, list[tuple[float, float | None]]] = {name: [] for name in sizes}
    results: dict[str, Any] = {}

    def collector(name: str) -> Any:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen[name].append((progress, total))

        return on_progress

    async with server.client() as one, server.client() as two:
        handles = {
            "big": await server.stage(one, make_records(sizes["big"], "big")),
            "small": await server.stage(two, make_records(sizes["small"], "small")),
        }
        legacy_engine.update_faults(latency_ms=1)

        async def commit(name: str, client: Any) -> None:
            results[name] = await client.call_tool(
                "commit_import", {"handle": handles[name]}, progress_callback=collector(name)
            )

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(commit, "big", one)
            tasks.start_soon(commit, "small", two)
    for name, size in sizes.items():
        assert server.structured(results[name])["record_count"] == size
        values = [p for p, _ in seen[name]]
        assert {total for _, total in seen[name]} == {size}, f"{name} saw another commit's progress"
        assert values[0] == 0 and values[-1] == size
        assert values == sorted(set(values))
        assert 500 in values and (1000 in values) == (size > 1000)
    assert len(legacy_engine.committed_batches()) == 2
