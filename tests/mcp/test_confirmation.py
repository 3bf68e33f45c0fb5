"""Commit confirmation as a multi round-trip request (input_required + sealed requestState)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequestFormParams, ElicitResult, InputRequiredResult

pytestmark = pytest.mark.anyio

ACCEPT = ElicitResult(action="accept", content={"confirm": True})


def answering(result: ElicitResult, asked: list[str]) -> Any:
    async def callback(ctx: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestFormParams)
        asked.append(params.message)
        return result

    return callback


def tamper(state: str) -> str:
    """The same sealed state with characters in its middle changed."""
    middle = len(state) // 2
    swapped = "".join("B" if ch == "A" else "A" for ch in state[middle : middle + 4])
    return state[:middle] + swapped + state[middle + 4 :]


async def test_accepted_confirmation_commits(server: Any, legacy_engine: Any, make_records: Any) -> None:
    asked: list[str] = []
    records = make_records(3)
    async with server.client(elicitation_callback=answering(ACCEPT, asked)) as client:
        handle = await server.stage(client, records)
        committed = server.structured(await client.call_tool("commit_import", {"handle": handle}))
    assert committed["status"] == "committed"
    assert len(asked) == 1 and "3 staged records" in asked[0]
    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == records


async def test_declined_confirmation_leaves_the_import_open_and_the_legacy_system_untouched(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    asked: list[str] = []
    decline = ElicitResult(action="decline")
    async with server.client(elicitation_callback=answering(decline, asked)) as client:
        handle = await server.stage(client, make_records(2))
        declined = server.structured(await client.call_tool("commit_import", {"handle": handle}))
        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
    assert len(asked) == 1
    assert (declined["status"], declined["operation_id"], declined["legacy_batch_id"]) == (
        "declined",
        None,
        None,
    )
    assert (status["status"], status["record_count"]) == ("open", 2)
    assert legacy_engine.committed_batches() == []


async def test_tampered_request_state_is_a_jsonrpc_error_and_commits_nothing(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(elicitation_callback=answering(ACCEPT, [])) as client:
        handle = await server.stage(client, make_records(2))
        first = await client.session.call_tool("commit_import", {"handle": handle}, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        assert list(first.input_requests or {}) == ["confirm"]
        assert first.request_state
        with pytest.raises(MCPError) as refused:
            await client.session.call_tool(
                "commit_import",
                {"handle": handle},
                input_responses={"confirm": ACCEPT},
                request_state=tamper(first.request_state),
                allow_input_required=True,
            )
        assert refused.value.code == -32602
        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
    assert status["status"] == "open"
    assert legacy_engine.committed_batches() == []


async def test_final_round_delivered_twice_commits_once_and_the_second_answer_is_a_replay(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    records = make_records(4)
    async with server.client(elicitation_callback=answering(ACCEPT, [])) as client:
        handle = await server.stage(client, records)
        first = await client.session.call_tool("commit_import", {"handle": handle}, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        final_round = {
            "input_responses": {"confirm": ACCEPT},
            "request_state": first.request_state,
            "allow_input_required": True,
        }
        one = await client.session.call_tool("commit_import", {"handle": handle}, **final_round)
        two = await client.session.call_tool("commit_import", {"handle": handle}, **final_round)
    a, b = server.structured(one), server.structured(two)
    assert (a["status"], a["replayed"]) == ("committed", False)
    assert (b["status"], b["replayed"]) == ("committed", True)
    assert (b["operation_id"], b["legacy_batch_id"]) == (a["operation_id"], a["legacy_batch_id"])
    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == records


@pytest.mark.parametrize("settings_overrides", [{"confirm_commit": "always"}])
async def test_always_confirm_refuses_a_client_without_elicitation_with_32021(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client() as client:
        handle = await server.stage(client, make_records(2))
        with pytest.raises(MCPError) as refused:
            await client.call_tool("commit_import", {"handle": handle})
        assert refused.value.code == -32021
        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
    assert status["status"] == "open"
    assert legacy_engine.committed_batches() == []


@pytest.mark.parametrize("settings_overrides", [{"confirm_commit": "never"}])
async def test_never_confirm_commits_without_asking_even_a_client_with_elicitation(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    asked: list[str] = []
    async with server.client(elicitation_callback=answering(ACCEPT, asked)) as client:
        handle = await server.stage(client, make_records(2))
        first = await client.session.call_tool("commit_import", {"handle": handle}, allow_input_required=True)
    assert not isinstance(first, InputRequiredResult)
    assert server.structured(first)["status"] == "committed"
    assert asked == []
    assert len(legacy_engine.committed_batches()) == 1
