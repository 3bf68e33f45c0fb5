"""Voiding a batch that landed is a destructive act, and is asked for like a commit (issue 21).

``abort_import`` of a committed import gets the commit's confirmation policy, bound to what it
names (the batch): in the 2026-07-28 era as ``input_required`` rounds, in the 2025 era as
``elicitation/create`` on the session. Dropping an open import's staged records asks nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import ElicitRequestFormParams, ElicitResult

pytestmark = pytest.mark.anyio

ACCEPT = ElicitResult(action="accept", content={"confirm": True})
DECLINE = ElicitResult(action="decline")


def answering(result: ElicitResult, asked: list[str]) -> Any:
    async def callback(ctx: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestFormParams)
        asked.append(params.message)
        return result

    return callback


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 (MRTR) and the 2025 session
async def test_a_void_is_asked_for_naming_its_batch_and_a_decline_voids_nothing(
    server: Any, legacy_engine: Any, make_records: Any, mode: str
) -> None:
    asked: list[str] = []
    async with server.client() as plain:  # commits without a question: it cannot show a form
        handle = await server.stage(plain, make_records(3))
        committed = server.structured(await plain.call_tool("commit_import", {"handle": handle}))
    async with server.client(elicitation_callback=answering(DECLINE, asked), mode=mode) as client:
        declined = server.structured(await client.call_tool("abort_import", {"handle": handle}))
        still = server.structured(await client.call_tool("get_import_status", {"handle": handle}))

    assert declined["status"] == "declined"
    assert len(asked) == 1 and f'"{committed["legacy_batch_id"]}"' in asked[0] and "3 records" in asked[0]
    assert still["status"] == "committed"
    [batch] = legacy_engine.committed_batches()
    assert not batch["voided"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_accepted_void_compensates_once(
    server: Any, legacy_engine: Any, make_records: Any, mode: str
) -> None:
    asked: list[str] = []
    async with server.client() as plain:
        handle = await server.stage(plain, make_records(2))
        await plain.call_tool("commit_import", {"handle": handle})
    async with server.client(elicitation_callback=answering(ACCEPT, asked), mode=mode) as client:
        aborted = server.structured(await client.call_tool("abort_import", {"handle": handle}))
        again = server.structured(await client.call_tool("abort_import", {"handle": handle}))

    assert aborted["status"] == "compensated"
    assert again["status"] == "compensated" and len(asked) == 1, "a compensated import asks nothing more"
    [batch] = legacy_engine.committed_batches()
    assert batch["voided"]


async def test_dropping_an_open_import_asks_nothing(server: Any, make_records: Any) -> None:
    asked: list[str] = []
    async with server.client(elicitation_callback=answering(ACCEPT, asked)) as client:
        handle = await server.stage(client, make_records(2))
        aborted = server.structured(await client.call_tool("abort_import", {"handle": handle}))
    assert (aborted["status"], asked) == ("aborted", [])


@pytest.mark.parametrize("settings_overrides", [{"confirm_commit": "always"}])
async def test_under_always_a_client_that_cannot_show_a_form_cannot_void(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(elicitation_callback=answering(ACCEPT, [])) as asking:
        handle = await server.stage(asking, make_records(1))
        await asking.call_tool("commit_import", {"handle": handle})
    async with server.client() as plain:
        with pytest.raises(Exception) as refused:
            await plain.call_tool("abort_import", {"handle": handle})
    assert getattr(refused.value, "code", None) == -32021
    [batch] = legacy_engine.committed_batches()
    assert not batch["voided"]
