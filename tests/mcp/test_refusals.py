"""A refusal says why and what to do, and an import can be repaired (issue 22), over real HTTP.

The port here is the simulator behind a decorator that refuses a COMMIT the way a real system does
when it will not take one record: a ``LegacyRefused`` naming the record's position and field, with a
message that holds no record contents. The tool result, ``get_operation_status``, the admin API and
the log carry the refusal (the log without values); the text says a retry cannot help unchanged and
how to repair the import: ``replace_records`` by position, then commit again.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from adapter.bootstrap import Kit, build
from adapter.entrypoints.http.app import create_app
from adapter.legacy.forwarding import ForwardingPort, ForwardingSession
from adapter.ports.legacy import CommittedBatch, LegacyRefused, Record, Refusal
from adapter.store import Store
from tests.mcp.conftest import Running
from tests.support.constants import OPERATOR_TOKEN
from tests.support.kit import kit_settings
from tests.support.servers import serve_in_process

pytestmark = pytest.mark.anyio

LIMIT = 1000  # the "legacy system" refuses an amount above this
SECRET_NAME = "Zyxwvut Secret-Customer"


class _Session(ForwardingSession):
    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.added: list[Record] = []

    def add(self, records: Sequence[Record]) -> None:
        self.added.extend(records)
        super().add(records)

    def commit(self) -> CommittedBatch:
        for position, record in enumerate(self.added):
            if record.get("amount", 0) > LIMIT:
                raise LegacyRefused(
                    Refusal("numeric_value_out_of_range", f"amount above {LIMIT}", position, "amount")
                )
        return super().commit()


class RefusingPort(ForwardingPort):
    """The simulator, refusing at COMMIT a batch with an amount above ``LIMIT``."""

    def open_session(self) -> _Session:
        return _Session(self._inner.open_session())


@pytest.fixture
async def refusing(
    store: Store, db_url: str, legacy_address: tuple[str, int], tmp_path: Any
) -> AsyncIterator[Running]:
    settings = kit_settings(db_url, legacy_address, tmp_path, admin_token=OPERATOR_TOKEN)
    from adapter.bootstrap import build_legacy_port

    kit: Kit = build(settings, store=store, legacy=RefusingPort(build_legacy_port(settings)))
    try:
        async with serve_in_process(create_app(kit, run_maintenance=False)) as base_url:
            yield Running(base_url, kit)
    finally:
        kit.close()


def records(bad_at: int | None = None) -> list[dict[str, Any]]:
    rows = [{"id": i, "name": SECRET_NAME, "amount": 10 * i} for i in range(5)]
    if bad_at is not None:
        rows[bad_at]["amount"] = 987654
    return rows


async def test_a_refused_commit_says_which_record_which_field_and_what_to_do(
    refusing: Running, legacy_engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with refusing.client() as client:
        handle = await refusing.stage(client, records(bad_at=2))
        refused = await client.call_tool("commit_import", {"handle": handle})
        text = refusing.error_text(refused)
        details = refused.structured_content or {}
        operation_id = details.get("operation_id")
        status = refusing.structured(
            await client.call_tool("get_operation_status", {"operation_id": operation_id})
        )
        import_status = refusing.structured(await client.call_tool("get_import_status", {"handle": handle}))
    async with httpx.AsyncClient() as http:
        detail = (
            await http.get(
                f"{refusing.base_url}/admin/operations/{operation_id}",
                headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
            )
        ).json()

    assert text.startswith("legacy_rejected: record 2, field 'amount': numeric_value_out_of_range")
    assert "replace_records" in text and "Retrying unchanged will fail" in text
    assert operation_id and operation_id in text, "a failed commit's result carries its operation id"
    assert details["retry_helps"] is False
    assert details["refusal"] == {
        "code": "numeric_value_out_of_range",
        "message": f"amount above {LIMIT}",
        "position": 2,
        "field": "amount",
    }
    assert status["status"] == "failed" and status["error"]["refusal"]["position"] == 2
    assert import_status["status"] == "open", "nothing was committed"
    assert "numeric_value_out_of_range" in str(detail), "the operator sees why"
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "numeric_value_out_of_range" in logged and "record 2" in logged
    assert SECRET_NAME not in logged and "987654" not in logged, "the log never carries record contents"
    assert legacy_engine.committed_batches() == []


async def test_the_refused_record_is_replaced_by_position_and_the_import_commits(
    refusing: Running, legacy_engine: Any
) -> None:
    async with refusing.client() as client:
        handle = await refusing.stage(client, records(bad_at=3))
        assert (await client.call_tool("commit_import", {"handle": handle})).is_error
        fixed = {"id": 3, "name": SECRET_NAME, "amount": 30}
        replaced = refusing.structured(
            await client.call_tool(
                "replace_records", {"handle": handle, "records": [{"position": 3, "record": fixed}]}
            )
        )
        committed = refusing.structured(await client.call_tool("commit_import", {"handle": handle}))

    assert (replaced["replaced"], replaced["record_count"]) == (1, 5)
    assert committed["status"] == "committed"
    [batch] = legacy_engine.committed_batches()
    assert batch["records"][3] == fixed
    assert [r["id"] for r in batch["records"]] == [0, 1, 2, 3, 4], "in place, in order"


async def test_a_replacement_must_name_a_staged_record_and_be_valid_and_open(
    refusing: Running, legacy_engine: Any
) -> None:
    async with refusing.client() as client:
        handle = await refusing.stage(client, records())
        beyond = await client.call_tool(
            "replace_records", {"handle": handle, "records": [{"position": 5, "record": {"id": 5}}]}
        )
        twice = await client.call_tool(
            "replace_records",
            {"handle": handle, "records": [{"position": 1, "record": {}}, {"position": 1, "record": {}}]},
        )
        negative = await client.call_tool(
            "replace_records", {"handle": handle, "records": [{"position": -1, "record": {}}]}
        )
        await client.call_tool("commit_import", {"handle": handle})
        committed = await client.call_tool(
            "replace_records", {"handle": handle, "records": [{"position": 0, "record": {"id": 0}}]}
        )

    assert refusing.error_text(beyond).startswith("validation_error: no staged record at position 5")
    assert refusing.error_text(twice).startswith("validation_error: a position may be replaced once")
    assert refusing.error_text(negative).startswith("validation_error: records.0.position")
    assert refusing.error_text(committed).startswith("invalid_state:")
    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == records(), "what was committed is what was staged"


async def test_a_replacement_with_the_same_key_is_answered_from_the_record(refusing: Running) -> None:
    async with refusing.client() as client:
        handle = await refusing.stage(client, records())
        change = {"handle": handle, "records": [{"position": 0, "record": {"id": 0, "amount": 1}}]}
        first = refusing.structured(
            await client.call_tool("replace_records", {**change, "idempotency_key": "r1"})
        )
        again = refusing.structured(
            await client.call_tool("replace_records", {**change, "idempotency_key": "r1"})
        )
        other = {"handle": handle, "records": [{"position": 1, "record": {"id": 1}}], "idempotency_key": "r1"}
        reused = await client.call_tool("replace_records", other)
    assert (first["replayed"], again["replayed"]) == (False, True)
    assert refusing.error_text(reused).startswith("idempotency_key_reused:")
