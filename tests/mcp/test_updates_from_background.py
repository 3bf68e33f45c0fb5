"""Subscribers hear about changes that no request of theirs made: reconciliation and compensation."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.to_thread
import pytest

from adapter.bootstrap import Kit

pytestmark = pytest.mark.anyio

# The server's own maintenance loop stays out of the way, so the test decides when reconciliation runs.
QUIET = pytest.mark.parametrize("settings_overrides", [{"reconcile_interval_seconds": 3600}])


async def drain(subscription: Any, seconds: float = 0.5) -> list[str]:
    seen: list[str] = []
    with anyio.move_on_after(seconds):
        while True:
            seen.append((await subscription.__anext__()).uri)
    return seen


async def next_update(subscription: Any) -> str:
    with anyio.fail_after(5):
        return str((await subscription.__anext__()).uri)


async def staged_import(server: Any, client: Any) -> tuple[str, str]:
    """An import with one staged record: (handle, its resource URI)."""
    handle = server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]
    await client.call_tool("add_record", {"handle": handle, "record": {"a": 1}})
    return handle, f"import://{handle}"


@QUIET
async def test_a_reconciliation_notifies_the_imports_subscriber(
    server: Any, kit: Kit, legacy_engine: Any
) -> None:
    async with server.client() as alice:
        handle, uri = await staged_import(server, alice)
        async with alice.listen(resource_subscriptions=[uri]) as subscription:
            legacy_engine.update_faults(drop_after_commit=1.0)
            unknown = server.structured(await alice.call_tool("commit_import", {"handle": handle}))
            legacy_engine.update_faults(drop_after_commit=0.0)
            assert unknown["status"] == "outcome_unknown"
            await drain(subscription)

            resolutions = await anyio.to_thread.run_sync(kit.service.reconcile)

            assert [r.status for r in resolutions] == ["succeeded"]
            assert await next_update(subscription) == uri
            state = json.loads((await alice.read_resource(uri)).contents[0].text)
            assert (state["status"], state["legacy_batch_id"]) == (
                "committed",
                legacy_engine.committed_batches()[0]["legacy_batch_id"],
            )


@QUIET
async def test_an_operator_compensation_notifies_the_imports_subscriber(
    server: Any, kit: Kit, legacy_engine: Any
) -> None:
    async with server.client() as alice:
        handle, uri = await staged_import(server, alice)
        committed = server.structured(await alice.call_tool("commit_import", {"handle": handle}))
        async with alice.listen(resource_subscriptions=[uri]) as subscription:
            await drain(subscription)

            await anyio.to_thread.run_sync(
                lambda: kit.admin.act(
                    committed["operation_id"], "compensate", actor="operator", reason="test"
                )
            )

            assert await next_update(subscription) == uri
            state = json.loads((await alice.read_resource(uri)).contents[0].text)
            assert state["status"] == "compensated"
    assert legacy_engine.committed_batches()[0]["voided"] is True
