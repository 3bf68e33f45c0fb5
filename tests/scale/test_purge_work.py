"""A purge costs what it deletes, not what the store keeps (issue 25).

Every purge batch holds the write lock of a SQLite store while it runs, so a batch that reads rows
it then skips (too young for the cut-off, or never purged, as committed imports) makes every other
writer wait for the whole history: at a million imports a batch of 100 operations read 20 ms of
them, the last, empty batch of events every event (1 s), and another tenant's p99 grew 20x during a
purge (``bench/history.py``). Here two stores hold the same old imports past the retention under
histories four times apart in size; SQLite counts the virtual machine instructions each purge runs
(its progress handler), and the larger history may cost little more.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import event

from adapter.services.retention import PurgeReport, purge_finished
from tests.support.benches import kit_with_history, load_bench

history = load_bench("history")

OLD = 200  # imports past the retention in both stores
STEP = 100  # SQLite instructions per progress-handler call


def _purge_instructions(workdir: Path, imports: int) -> tuple[PurgeReport, int]:
    """A store with ``imports`` of history, the oldest :data:`OLD` past the retention: what its purge
    deleted, and about how many SQLite instructions it ran."""
    past = history.History(imports, datetime.now(UTC))
    retention = past.now - past.created(OLD)
    with kit_with_history(f"sqlite:///{workdir / 'kit.db'}", past, workdir) as kit:
        engine = kit.service.ctx.store.engine
        calls = [0]

        def count(connection: sqlite3.Connection, _record: Any) -> None:
            connection.set_progress_handler(lambda: calls.__setitem__(0, calls[0] + 1) or 0, STEP)

        event.listen(engine, "connect", count)
        engine.dispose()  # the connections the fill opened go; new ones count
        report = purge_finished(kit.service.ctx, retention=retention, pause_ratio=0)
    return report, calls[0] * STEP


def test_a_purge_costs_what_it_deletes_not_the_history_it_keeps(tmp_path: Path) -> None:
    (small_dir := tmp_path / "small").mkdir()
    (large_dir := tmp_path / "large").mkdir()
    small, small_work = _purge_instructions(small_dir, 2_000)
    large, large_work = _purge_instructions(large_dir, 8_000)
    assert small.operations > 2 * OLD and small.events > 8 * OLD and small.imports > 0
    # the same old imports go in both: their operations, the final ones among them, their events
    assert (large.operations, large.imports) == (small.operations, small.imports)
    assert abs(large.events - small.events) <= 10
    assert large_work < 1.3 * small_work, (small_work, large_work)
