"""The import tools over real Streamable HTTP: the happy path and idempotent replays."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.anyio


async def test_happy_path_lands_exactly_the_records_in_order_and_results_match_output_schemas(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    first = {"id": "first", "name": "Ada"}
    rest = make_records(4)
    async with server.client() as client:  # no elicitation callback: no confirmation question
        begun_result = await client.call_tool("begin_import", {"target": "customers"})
        begun = server.structured(begun_result)
        await server.check_output_schema(client, "begin_import", begun)
        handle = begun["handle"]
        assert (begun["status"], begun["target"], begun["record_count"], begun["replayed"]) == (
            "open",
            "customers",
            0,
            False,
        )

        added = server.structured(await client.call_tool("add_record", {"handle": handle, "record": first}))
        await server.check_output_schema(client, "add_record", added)
        assert (added["handle"], added["record_count"], added["replayed"]) == (handle, 1, False)

        many = server.structured(await client.call_tool("add_records", {"handle": handle, "records": rest}))
        await server.check_output_schema(client, "add_records", many)
        assert (many["accepted"], many["record_count"]) == (4, 5)

        committed = server.structured(await client.call_tool("commit_import", {"handle": handle}))
        await server.check_output_schema(client, "commit_import", committed)
        assert committed["status"] == "committed"
        assert committed["record_count"] == 5
        assert committed["replayed"] is False
        assert committed["legacy_batch_id"] and committed["operation_id"]

        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
        await server.check_output_schema(client, "get_import_status", status)
        assert (status["status"], status["record_count"]) == ("committed", 5)
        commits = [op for op in status["operations"] if op["kind"] == "commit"]
        assert [(op["operation_id"], op["status"]) for op in commits] == [
            (committed["operation_id"], "succeeded")
        ]

        operation = server.structured(
            await client.call_tool("get_operation_status", {"operation_id": committed["operation_id"]})
        )
        await server.check_output_schema(client, "get_operation_status", operation)
        assert (operation["kind"], operation["status"]) == ("commit", "succeeded")
        assert operation["result"]["legacy_batch_id"] == committed["legacy_batch_id"]
        assert operation["history"], "an operation has a history"

    [batch] = legacy_engine.committed_batches()
    assert batch["legacy_batch_id"] == committed["legacy_batch_id"]
    assert batch["records"] == [first, *rest]


async def test_replays_with_the_same_idempotency_key_return_replayed_and_one_legacy_batch(
    server: Any, legacy_engine: Any
) -> None:
    async with server.client() as client:
        begin = {"target": "customers", "idempotency_key": "begin-1"}
        one = server.structured(await client.call_tool("begin_import", begin))
        two = server.structured(await client.call_tool("begin_import", begin))
        assert (one["replayed"], two["replayed"]) == (False, True)
        assert two["handle"] == one["handle"]
        handle = one["handle"]

        add = {"handle": handle, "record": {"n": 1}, "idempotency_key": "add-1"}
        a1 = server.structured(await client.call_tool("add_record", add))
        a2 = server.structured(await client.call_tool("add_record", add))
        assert (a1["replayed"], a2["replayed"]) == (False, True)
        assert a1["record_count"] == a2["record_count"] == 1

        adds = {"handle": handle, "records": [{"n": 2}, {"n": 3}], "idempotency_key": "adds-1"}
        m1 = server.structured(await client.call_tool("add_records", adds))
        m2 = server.structured(await client.call_tool("add_records", adds))
        assert (m1["replayed"], m2["replayed"]) == (False, True)
        assert m1["record_count"] == m2["record_count"] == 3

        commit = {"handle": handle, "idempotency_key": "commit-1"}
        c1 = server.structured(await client.call_tool("commit_import", commit))
        c2 = server.structured(await client.call_tool("commit_import", commit))
        assert (c1["replayed"], c2["replayed"]) == (False, True)
        assert (c2["status"], c2["operation_id"], c2["legacy_batch_id"]) == (
            "committed",
            c1["operation_id"],
            c1["legacy_batch_id"],
        )

    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == [{"n": 1}, {"n": 2}, {"n": 3}]


async def test_an_idempotency_key_reused_with_other_arguments_is_an_error_result(server: Any) -> None:
    async with server.client() as client:
        handle = server.structured(
            await client.call_tool("begin_import", {"target": "customers", "idempotency_key": "k-begin"})
        )["handle"]
        reused = await client.call_tool("begin_import", {"target": "orders", "idempotency_key": "k-begin"})
        assert server.error_text(reused).startswith("idempotency_key_reused:")

        await client.call_tool(
            "add_record", {"handle": handle, "record": {"a": 1}, "idempotency_key": "k-add"}
        )
        reused_add = await client.call_tool(
            "add_record", {"handle": handle, "record": {"a": 2}, "idempotency_key": "k-add"}
        )
        assert server.error_text(reused_add).startswith("idempotency_key_reused:")

        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
        assert status["record_count"] == 1, "the refused call staged nothing"


async def test_a_record_that_is_not_an_object_is_refused_by_its_index_and_nothing_is_staged(
    server: Any,
) -> None:
    async with server.client() as client:
        handle = server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]
        refused = await client.call_tool(
            "add_records", {"handle": handle, "records": [{"a": 1}, [1], {"b": 2}]}
        )
        assert server.error_text(refused) == "validation_error: record 1 is not a JSON object"
        empty = await client.call_tool("add_records", {"handle": handle, "records": []})
        assert server.error_text(empty).startswith("validation_error: records:")

        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
        assert status["record_count"] == 0, "the refused calls staged nothing"
