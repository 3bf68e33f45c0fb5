"""Two server processes on one PostgreSQL database: a request may land on either.

Each test talks to worker ``a`` and worker ``b`` (separate processes, separate ports, one schema, one
simulator over TCP) and checks that handles, idempotency, confirmation rounds, cursors, listen streams
and crash recovery do not care which worker answers.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from typing import Any

import anyio
import httpx
import pytest
from mcp_types import ElicitRequestFormParams, ElicitResult, InputRequiredResult

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.postgres]

ACCEPT = ElicitResult(action="accept", content={"confirm": True})


def tagged(tag: str, n: int) -> list[dict[str, Any]]:
    return [{"tag": tag, "n": i} for i in range(n)]


async def stage(cluster: Any, client: Any, tag: str, n: int, **begin: Any) -> str:
    handle = cluster.structured(await client.call_tool("begin_import", {"target": "customers", **begin}))[
        "handle"
    ]
    records = tagged(tag, n)
    for start in range(0, n, 500):
        chunk = records[start : start + 500]
        added = cluster.structured(
            await client.call_tool("add_records", {"handle": handle, "records": chunk})
        )
        assert added["accepted"] == len(chunk)
    return handle


async def test_a_listen_stream_on_a_hears_a_commit_finished_on_b(cluster: Any) -> None:
    tag = secrets.token_hex(4)
    async with cluster.a.client() as on_a, cluster.b.client() as on_b:
        handle = await stage(cluster, on_a, tag, 3)
        uri = f"import://{handle}"
        async with on_a.listen(resource_subscriptions=[uri]) as subscription:
            committed = cluster.structured(await on_b.call_tool("commit_import", {"handle": handle}))
            assert committed["status"] == "committed"
            with anyio.fail_after(10):
                update = await subscription.__anext__()
            assert update.uri == uri
        state = json.loads((await on_a.read_resource(uri)).contents[0].text)
    assert state["status"] == "committed"
    assert [b["legacy_batch_id"] for b in cluster.batches(tag)] == [committed["legacy_batch_id"]]


async def test_a_listen_stream_does_not_hear_another_principals_import(cluster: Any) -> None:
    tag = secrets.token_hex(4)
    async with cluster.a.client("alice") as alice_a, cluster.b.client("bob") as bob_b:
        alices = await stage(cluster, alice_a, tag, 1)
        bobs = await stage(cluster, bob_b, tag + "b", 1)
        # Alice asks for both; only her own is honoured (the filter holds across workers).
        async with alice_a.listen(resource_subscriptions=[f"import://{alices}", f"import://{bobs}"]) as sub:
            cluster.structured(await bob_b.call_tool("commit_import", {"handle": bobs}))
            cluster.structured(await alice_a.call_tool("abort_import", {"handle": alices}))
            with anyio.fail_after(10):
                first = await sub.__anext__()
            seen = [first.uri]
            with anyio.move_on_after(1.0):
                while True:
                    seen.append((await sub.__anext__()).uri)
    assert set(seen) == {f"import://{alices}"}


async def test_a_confirmation_asked_by_a_and_answered_on_b_commits_once(cluster: Any) -> None:
    tag = secrets.token_hex(4)

    async def never(ctx: Any, params: Any) -> ElicitResult:  # the test answers by hand, on the other worker
        assert isinstance(params, ElicitRequestFormParams)
        raise AssertionError("not asked through the callback here")

    async with (
        cluster.a.client(elicitation_callback=never) as on_a,
        cluster.b.client(elicitation_callback=never) as on_b,
    ):
        handle = await stage(cluster, on_a, tag, 4)
        asked = await on_a.session.call_tool("commit_import", {"handle": handle}, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult) and asked.request_state
        answer = {"input_responses": {"confirm": ACCEPT}, "request_state": asked.request_state}
        first = await on_b.session.call_tool(
            "commit_import", {"handle": handle}, allow_input_required=True, **answer
        )
        assert not isinstance(first, InputRequiredResult)
        assert first.structured_content is not None
        assert first.structured_content["status"] == "committed"
        # The same answer sent again, to either worker, never makes a second batch.
        for client in (on_a, on_b):
            again = await client.session.call_tool(
                "commit_import", {"handle": handle}, allow_input_required=True, **answer
            )
            if not isinstance(again, InputRequiredResult) and not again.is_error:
                assert again.structured_content is not None
                assert (
                    again.structured_content["legacy_batch_id"] == first.structured_content["legacy_batch_id"]
                )
    assert len(cluster.batches(tag)) == 1


async def test_a_cursor_issued_by_a_pages_on_b(cluster: Any) -> None:
    tag = secrets.token_hex(4)
    async with cluster.a.client("carol") as on_a, cluster.b.client("carol") as on_b:
        handles = [await stage(cluster, on_a, f"{tag}{i}", 1) for i in range(7)]
        first = await on_a.list_resources()
        assert len(first.resources) == 3 and first.next_cursor
        seen = [r.uri for r in first.resources]
        cursor: str | None = first.next_cursor
        clients = [on_b, on_a]
        turn = 0
        while cursor:
            page = await clients[turn % 2].list_resources(cursor=cursor)
            seen += [r.uri for r in page.resources]
            cursor = page.next_cursor
            turn += 1
    assert sorted(seen) == sorted(f"import://{h}" for h in handles)
    assert len(seen) == len(set(seen))


async def test_one_hundred_concurrent_commits_with_one_key_over_both_workers_make_one_batch(
    cluster: Any,
) -> None:
    tag = secrets.token_hex(4)
    async with cluster.a.client() as on_a:
        handle = await stage(cluster, on_a, tag, 200)
    key = f"commit-{tag}"
    answers: list[Any] = []

    async def commit(worker: Any, http: httpx.AsyncClient) -> None:
        answers.append(
            await worker.raw_call(http, "commit_import", {"handle": handle, "idempotency_key": key})
        )

    limits = httpx.Limits(max_connections=100)
    async with (
        httpx.AsyncClient(limits=limits) as http_a,
        httpx.AsyncClient(limits=limits) as http_b,
        anyio.create_task_group() as tasks,
    ):
        for i in range(100):
            tasks.start_soon(commit, cluster.a if i % 2 else cluster.b, http_a if i % 2 else http_b)

    assert len(answers) == 100
    results = [a["result"] for a in answers]
    assert not [r for r in results if r.get("isError")]
    outcomes = [r["structuredContent"] for r in results]
    # Every call names the one operation; a call that lands while it runs is told "in_progress".
    assert len({o["operation_id"] for o in outcomes}) == 1
    assert {o["status"] for o in outcomes} <= {"in_progress", "committed"}
    assert len({o["legacy_batch_id"] for o in outcomes if o["status"] == "committed"}) <= 1
    [batch] = cluster.batches(tag)
    assert batch["record_count"] == 200
    async with cluster.b.client() as on_b:
        status = json.loads((await on_b.read_resource(f"import://{handle}")).contents[0].text)
    assert (status["status"], status["legacy_batch_id"]) == ("committed", batch["legacy_batch_id"])


async def test_sigkill_of_a_worker_mid_commit_is_reconciled_by_another(cluster: Any) -> None:
    tag = secrets.token_hex(4)
    victim = cluster.start("victim")
    async with victim.client() as on_victim:
        handle = await stage(cluster, on_victim, tag, 600)
    cluster.legacy.update_faults(latency_ms=100)  # 12 chunks and a COMMIT: about 1.5 s in flight
    try:
        async with anyio.create_task_group() as tasks:

            async def doomed_commit() -> None:
                async with httpx.AsyncClient() as http:
                    with contextlib.suppress(httpx.HTTPError):  # the worker dies under it, as intended
                        await victim.raw_call(http, "commit_import", {"handle": handle})

            tasks.start_soon(doomed_commit)
            with anyio.fail_after(30):
                while not cluster.sql(
                    "SELECT 1 FROM operations WHERE kind = 'commit' AND status = 'in_progress'"
                ):
                    await anyio.sleep(0.05)
            await anyio.sleep(0.4)
            [(operation_id, owner, status)] = cluster.sql(
                "SELECT o.id, o.lease_owner, o.status FROM operations o JOIN imports i ON i.id = o.import_id "
                "WHERE o.kind = 'commit' AND o.status = 'in_progress'"
            )
            victim.kill()
    finally:
        cluster.legacy.update_faults(latency_ms=0)
    assert status == "in_progress" and f":{victim.process.pid}:" in owner  # killed mid-commit, lease held

    # Worker a (or b) takes the lease over once it runs out.
    with anyio.fail_after(60):
        while True:
            rows = cluster.sql(
                "SELECT o.status FROM operations o JOIN imports i ON i.id = o.import_id "
                "WHERE o.kind = 'commit' AND o.status IN ('in_progress', 'outcome_unknown')"
            )
            if not rows:
                break
            await anyio.sleep(0.2)
    [(final, lease_after)] = cluster.sql(
        "SELECT status, lease_owner FROM operations WHERE id = :id", id=operation_id
    )
    # Another worker took it over: killed before COMMIT it resumes the commit (operation.resumed),
    # killed with COMMIT out it asks the legacy system (operation.reconciled).
    taken_over = cluster.sql(
        "SELECT kind FROM events WHERE operation_id = :id "
        "AND kind IN ('operation.reconciled', 'operation.resumed')",
        id=operation_id,
    )
    assert taken_over and lease_after is None, (final, lease_after)
    if ("operation.resumed",) in [tuple(row) for row in taken_over]:
        assert final == "succeeded", "a resumed commit lands"
    batches = cluster.batches(tag)
    assert len(batches) <= 1
    async with cluster.a.client() as on_a:
        status = json.loads((await on_a.read_resource(f"import://{handle}")).contents[0].text)
    if batches:
        assert (status["status"], status["legacy_batch_id"]) == ("committed", batches[0]["legacy_batch_id"])
        assert batches[0]["record_count"] == 600
    else:
        assert status["status"] != "committed"
