"""The boundary cases seed 000 names, over real HTTP with the SDK client or raw JSON-RPC.

The catalogue requests and their refusals, abort while a commit is undecided, cancellation right
before and during COMMIT, and rights that change between two pages of ``resources/list``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp.shared.exceptions import MCPError
from sqlalchemy import update

from adapter.store.tables import ImportRow

pytestmark = pytest.mark.anyio

QUIET = pytest.mark.parametrize("settings_overrides", [{"reconcile_interval_seconds": 3600}])
FINAL = ("succeeded", "cancelled", "outcome_unknown", "failed", "needs_operator")

HINTS = {  # (readOnly, destructive, idempotent), as docs/state-matrix.md lists them
    "begin_import": (False, False, False),
    "add_record": (False, False, False),
    "add_records": (False, False, False),
    "replace_records": (False, False, False),
    "commit_import": (False, True, True),
    "abort_import": (False, True, True),
    "get_import_status": (True, False, True),
    "get_operation_status": (True, False, True),
}


async def begin(server: Any, client: Any, records: int = 0) -> str:
    handle = server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]
    if records:
        batch = [{"id": i} for i in range(records)]
        await client.call_tool("add_records", {"handle": handle, "records": batch})
    return handle


async def operation_by_key(server: Any, client: Any, key: str) -> dict[str, Any] | None:
    result = await client.call_tool("get_operation_status", {"idempotency_key": key})
    return None if result.is_error else server.structured(result)


async def final_operation(server: Any, client: Any, key: str) -> dict[str, Any]:
    with anyio.fail_after(20):
        while True:
            operation = await operation_by_key(server, client, key)
            if operation is not None and operation["status"] in FINAL:
                return operation
            await anyio.sleep(0.1)


# --- the catalogue -----------------------------------------------------------------------------------


async def test_annotations_prompts_templates_unknown_tool_and_schema_errors(server: Any) -> None:
    async with server.client() as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        prompts = (await client.list_prompts()).prompts
        with pytest.raises(MCPError) as no_prompt:
            await client.get_prompt("anything")
        templates = (await client.list_resource_templates()).resource_templates
        with pytest.raises(MCPError) as unknown_tool:
            await client.call_tool("drop_database", {})
        wrong_type = await client.call_tool("add_records", {"handle": "imp_x", "records": "all of them"})
        unknown_field = await client.call_tool("begin_import", {"target": "customers", "force": True})
        missing = await client.call_tool("commit_import", {})
    assert set(tools) == set(HINTS)
    for name, (read_only, destructive, idempotent) in HINTS.items():
        hints = tools[name].annotations
        assert hints is not None
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
            read_only,
            destructive,
            idempotent,
        ), name
        assert hints.open_world_hint is False
    assert prompts == []
    assert no_prompt.value.code == -32602
    assert [(t.uri_template, t.mime_type) for t in templates] == [
        ("import://{handle}", "application/json"),
        ("targets://{name}", "application/json"),  # each target's record schema (wrap-your-own-system.md)
    ]
    assert (unknown_tool.value.code, unknown_tool.value.message) == (-32602, "Unknown tool: drop_database")
    assert server.error_text(wrong_type).startswith("validation_error: records")
    assert server.error_text(unknown_field).startswith("validation_error: force")
    assert server.error_text(missing).startswith("validation_error: handle")


# --- abort while a commit is undecided -----------------------------------------------------------------


async def test_abort_while_a_commit_runs_stops_it_before_commit_and_nothing_lands(
    server: Any, legacy_engine: Any
) -> None:
    """The server owns a running commit; its owner stops it with abort_import, on another connection."""
    async with server.client() as client, server.client() as watcher:
        running = await begin(server, client, records=40)
        legacy_engine.update_faults(latency_ms=100)  # 4 s of records: the abort comes in the middle
        answers: list[Any] = []
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: _call_into(answers, client, "commit_import", {"handle": running}))
            with anyio.fail_after(15):
                while (
                    server.structured(await watcher.call_tool("get_import_status", {"handle": running}))[
                        "status"
                    ]
                    != "committing"
                ):
                    await anyio.sleep(0.05)
            await anyio.sleep(0.5)
            aborted = server.structured(await watcher.call_tool("abort_import", {"handle": running}))
        after = server.structured(await client.call_tool("get_import_status", {"handle": running}))
        [operation] = [o for o in after["operations"] if o["kind"] == "commit"]
    assert (aborted["status"], aborted["abort_requested"]) == ("aborted", False)
    assert server.structured(answers[0])["status"] == "cancelled", "the waiting commit request learns it"
    assert (after["status"], operation["status"]) == ("aborted", "cancelled")
    assert legacy_engine.committed_batches() == []


@QUIET
async def test_abort_while_the_outcome_is_unknown_is_recorded_and_voids_the_batch_once_it_is_known(
    server: Any, legacy_engine: Any
) -> None:
    async with server.client() as client:
        unknown = await begin(server, client, records=2)
        legacy_engine.update_faults(drop_after_commit=1.0)
        outcome = server.structured(await client.call_tool("commit_import", {"handle": unknown}))
        legacy_engine.update_faults(drop_after_commit=0.0)
        asked = server.structured(await client.call_tool("abort_import", {"handle": unknown}))
        still = server.structured(await client.call_tool("get_import_status", {"handle": unknown}))
        await anyio.to_thread.run_sync(server.kit.service.reconcile)  # the reconciler finds the batch
        settled = server.structured(await client.call_tool("get_import_status", {"handle": unknown}))
    assert outcome["status"] == "outcome_unknown"
    assert (asked["status"], asked["abort_requested"]) == ("outcome_unknown", True)
    assert "voided" in asked["message"]
    assert still["status"] == "outcome_unknown", "nothing is guessed before the legacy system answers"
    assert settled["status"] == "compensated"
    [batch] = legacy_engine.committed_batches()
    assert batch["voided"], "the batch that landed was voided"


async def _call_into(answers: list[Any], client: Any, tool: str, arguments: dict[str, Any]) -> None:
    answers.append(await client.call_tool(tool, arguments))


# --- cancellation at the edge of COMMIT ------------------------------------------------------------------


async def _cancel_when(client: Any, handle: str, key: str, ready: Any, on_progress: Any = None) -> list[Any]:
    """Start a commit, cancel the request once ``ready()`` says so; return the responses it got."""
    answered: list[Any] = []

    async def commit() -> None:
        answered.append(
            await client.call_tool(
                "commit_import", {"handle": handle, "idempotency_key": key}, progress_callback=on_progress
            )
        )

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(commit)
            await ready()
            tasks.cancel_scope.cancel()
    return answered


@QUIET
async def test_cancelling_while_commit_is_in_flight_gets_no_response_and_records_the_real_outcome(
    server: Any, legacy_engine: Any
) -> None:
    async with server.client() as client, server.client() as watcher:
        handle = await begin(server, client, records=2)
        legacy_engine.update_faults(latency_ms=400)

        async def commit_sent() -> None:
            while True:
                operation = await operation_by_key(server, watcher, "in-flight")
                points = [
                    h["detail"].get("point") for h in (operation or {}).get("history", []) if h["detail"]
                ]
                if "commit_sent" in points:
                    return
                await anyio.sleep(0.02)

        answered = await _cancel_when(client, handle, "in-flight", commit_sent)
        operation = await final_operation(server, watcher, "in-flight")
        imported = server.structured(await watcher.call_tool("get_import_status", {"handle": handle}))
    assert answered == [], "no late response to the cancelled request"
    # COMMIT was already on its way: the legacy system took it, and the record says so.
    assert operation["status"] == "succeeded"
    assert imported["status"] == "committed"
    assert len(legacy_engine.committed_batches()) == 1


@QUIET
async def test_cancelling_right_before_commit_gets_no_response_and_records_cancelled_with_no_batch(
    server: Any, legacy_engine: Any
) -> None:
    """Cancelled while the only chunk is with the legacy system: the one check left is the one just
    before COMMIT, so the commit must stop there (a cancel that raced the last progress report would
    arrive after COMMIT was sent and prove nothing about this edge)."""
    in_flight = anyio.Event()
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        if progress != int(progress):
            in_flight.set()  # a pulse: the legacy system is still taking the only chunk

    async with server.client() as client, server.client() as watcher:
        handle = await begin(server, client, records=4)  # one chunk: 4 ADDs at 300 ms each
        legacy_engine.update_faults(latency_ms=300)
        answered = await _cancel_when(client, handle, "before", in_flight.wait, on_progress)
        operation = await final_operation(server, watcher, "before")
        legacy_engine.update_faults(latency_ms=0)
        imported = server.structured(await watcher.call_tool("get_import_status", {"handle": handle}))
    assert answered == [], "no late response to the cancelled request"
    assert seen[0] == 0 and 0 < seen[-1] < 1, "cancelled while the only chunk was in flight"
    points = [h["detail"].get("point") for h in operation["history"] if h["detail"]]
    assert operation["status"] == "cancelled", operation
    assert "commit_sent" not in points, points
    assert (imported["status"], legacy_engine.committed_batches()) == ("open", [])


# --- rights that change between two pages -------------------------------------------------------------


@QUIET
async def test_an_import_purged_between_pages_is_skipped_and_no_other_principals_import_appears(
    server: Any,
) -> None:
    kit = server.kit
    async with server.client() as alice, server.client(server.bob_token) as bob:
        handles = [await begin(server, alice) for _ in range(5)]  # newest last
        bobs = {await begin(server, bob) for _ in range(3)}
        first = await alice.list_resources()
        assert [r.uri for r in first.resources] == [f"import://{h}" for h in reversed(handles[2:])]
        oldest = handles[0]
        await alice.call_tool("abort_import", {"handle": oldest})
        past = datetime.now(UTC) - timedelta(days=30)  # begun, aborted and expiring then
        with kit.store.unit_of_work() as uow:
            uow.session.execute(
                update(ImportRow)
                .where(ImportRow.handle_digest == kit.service.ctx.codec.digest(oldest))
                .values(created_at=past, updated_at=past, expires_at=past)
            )
            uow.commit()
        await _purge_once_no_other_purge_runs(kit)
        with kit.store.unit_of_work() as uow:
            assert uow.imports.by_digest(kit.service.ctx.codec.digest(oldest)) is None  # purged
        second = await alice.list_resources(cursor=first.next_cursor)
    assert [r.uri for r in second.resources] == [f"import://{handles[1]}"]
    assert second.next_cursor is None
    assert not {r.uri for r in second.resources} & {f"import://{h}" for h in bobs}


async def _purge_once_no_other_purge_runs(kit: Any) -> None:
    """A maintenance pass with the purge, run again until no other pass held the purge lock: the
    server's own loop purges once as it starts, and a pass that finds it purging skips its purge."""
    with anyio.fail_after(30):
        while (
            await anyio.to_thread.run_sync(lambda: kit.service.maintain(retention=timedelta(days=7)))
        ).purged is None:
            await anyio.sleep(0.05)


async def test_a_token_revoked_or_given_to_another_principal_between_pages_gets_no_more_pages(
    server: Any, serve_kit: Any, tmp_path: Path
) -> None:
    async with server.client() as alice:
        for _ in range(4):
            await begin(server, alice)
        cursor = (await alice.list_resources()).next_cursor
    assert cursor
    revoked = tmp_path / "revoked.json"
    revoked.write_text(json.dumps({server.bob_token: {"principal": "bob", "tenant": "acme"}}))
    reassigned = tmp_path / "reassigned.json"
    reassigned.write_text(json.dumps({server.alice_token: {"principal": "mallory", "tenant": "acme"}}))

    async with serve_kit(tokens=str(revoked)) as restarted:
        response, _ = await restarted.raw("resources/list", {"cursor": cursor}, name=None)
    assert response.status_code == 401

    async with serve_kit(tokens=str(reassigned)) as restarted, restarted.client() as now_mallory:
        with pytest.raises(MCPError) as refused:
            await now_mallory.list_resources(cursor=cursor)
        own = (await now_mallory.list_resources()).resources
    assert (refused.value.code, refused.value.message) == (-32602, "Invalid cursor")
    assert own == [], "the token's new principal sees none of alice's imports"
