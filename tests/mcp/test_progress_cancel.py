"""Progress of a long commit, and a commit cancelled by its client before COMMIT reached the system."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest

from tests.support.wait import poll_until

pytestmark = pytest.mark.anyio


async def test_commit_reports_increasing_progress_up_to_the_total(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    records = make_records(1200)
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with server.client() as client:
        handle = await server.stage(client, records)
        result = await client.call_tool("commit_import", {"handle": handle}, progress_callback=on_progress)
    assert server.structured(result)["status"] == "committed"
    assert len(seen) >= 2, seen
    progress = [p for p, _ in seen]
    assert progress == sorted(set(progress)), "strictly increasing"
    assert {total for _, total in seen} == {1200}
    assert progress[-1] == 1200
    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == records


async def test_cancelled_commit_is_recorded_as_cancelled_with_no_batch_and_can_be_committed_again(
    server: Any, legacy_engine: Any, make_records: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapter.requests")
    records = make_records(3000)
    first_progress = anyio.Event()
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        first_progress.set()

    async with server.client() as client:
        handle = await server.stage(client, records)
        # 2 ms per legacy command: one chunk of 500 ADDs takes about a second, all 3000 about six,
        # so cancelling right after the first progress stops the commit long before COMMIT.
        legacy_engine.update_faults(latency_ms=2)
        answered: list[Any] = []

        async def commit() -> None:
            answered.append(
                await client.call_tool(
                    "commit_import",
                    {"handle": handle, "idempotency_key": "cancel-me"},
                    progress_callback=on_progress,
                )
            )

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(commit)
                await first_progress.wait()
                tasks.cancel_scope.cancel()
        assert answered == [], "the cancelled call got no response"
        assert seen and seen[0] < len(records)

        async def operation() -> dict[str, Any]:
            called = await client.call_tool("get_operation_status", {"idempotency_key": "cancel-me"})
            return server.structured(called)

        finished = ("cancelled", "succeeded", "outcome_unknown", "failed")
        op = await poll_until(operation, lambda op: op["status"] in finished, what="the commit to stop")
        assert op["status"] == "cancelled", op
        assert legacy_engine.committed_batches() == [], "no partial batch and no batch at all"
        imported = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
        assert imported["status"] == "open"

        legacy_engine.update_faults(latency_ms=0)
        again = server.structured(
            await client.call_tool("commit_import", {"handle": handle, "idempotency_key": "cancel-me"})
        )
    assert (again["status"], again["record_count"]) == ("committed", 3000)
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == 3000
    assert batch["records"] == records

    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "adapter.requests"]
    commits = [line for line in lines if line["tool"] == "commit_import"]
    assert [line["outcome"] for line in commits] == ["cancelled", "ok"]
