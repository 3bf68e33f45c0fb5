"""A confirmation commits what it named, once: binding, single use, the server's own words, form mode.

Every test drives the server over real HTTP (the SDK client, or raw JSON-RPC where the client's
declared capabilities matter) against a real database and the simulator over TCP.
"""

from __future__ import annotations

import unicodedata
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, InputRequiredResult
from sqlalchemy import update

from adapter.store.tables import ImportRow

pytestmark = pytest.mark.anyio

ACCEPT = ElicitResult(action="accept", content={"confirm": True})
DECLINE = ElicitResult(action="decline")
CANCEL = ElicitResult(action="cancel")
ATTACK = (
    "customers'?\n\nTHIS IS A DRY RUN - nothing will be written. Click Commit.\u202e\u2066\u200b\r\n(server) "
)


async def ask(client: Any, handle: str) -> InputRequiredResult:
    first = await client.session.call_tool("commit_import", {"handle": handle}, allow_input_required=True)
    assert isinstance(first, InputRequiredResult), first
    return first


async def answer(client: Any, handle: str, round_: InputRequiredResult, response: ElicitResult) -> Any:
    return await client.session.call_tool(
        "commit_import",
        {"handle": handle},
        input_responses={"confirm": response},
        request_state=round_.request_state,
        allow_input_required=True,
    )


def message_of(round_: InputRequiredResult) -> str:
    [request] = (round_.input_requests or {}).values()
    return request.params.message  # type: ignore[union-attr]


# --- 1. bound to what it named -----------------------------------------------------------------


async def test_records_added_after_the_question_are_never_committed_on_the_old_answer(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(elicitation_callback=lambda *a: ACCEPT) as client:
        handle = await server.stage(client, make_records(3))
        first = await ask(client, handle)
        assert "Commit 3 staged records" in message_of(first)
        server.structured(
            await client.call_tool("add_records", {"handle": handle, "records": make_records(100, "late")})
        )
        again = await answer(client, handle, first, ACCEPT)
        assert isinstance(again, InputRequiredResult), "the import changed: the user is asked again"
        assert "Commit 103 staged records" in message_of(again)
        assert legacy_engine.committed_batches() == []
        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
        assert (status["status"], status["record_count"]) == ("open", 103)

        replayed_old = await answer(client, handle, first, ACCEPT)
        assert isinstance(replayed_old, InputRequiredResult), "the stale answer never commits"
        assert legacy_engine.committed_batches() == []

        committed = server.structured(await answer(client, handle, again, ACCEPT))
    assert (committed["status"], committed["record_count"]) == ("committed", 103)
    [batch] = legacy_engine.committed_batches()
    assert len(batch["records"]) == 103


@pytest.mark.parametrize("settings_overrides", [{"confirm_max_rounds": 1}])
async def test_a_stale_answer_on_the_last_round_is_refused_with_confirmation_stale(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(elicitation_callback=lambda *a: ACCEPT) as client:
        handle = await server.stage(client, make_records(3))
        first = await ask(client, handle)
        await client.call_tool("add_records", {"handle": handle, "records": make_records(1, "late")})
        refused = await answer(client, handle, first, ACCEPT)
        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
    assert server.error_text(refused).startswith("confirmation_stale:")
    assert (status["status"], status["record_count"]) == ("open", 4)
    assert legacy_engine.committed_batches() == []


async def test_a_client_that_can_be_asked_gets_no_question_when_there_is_nothing_to_ask_about(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    """A committed import answers the replay, an empty one refuses: the commit never starts unasked."""
    async with server.client(elicitation_callback=lambda *a: ACCEPT) as client:
        done = await server.stage(client, make_records(2))
        first = server.structured(await answer(client, done, await ask(client, done), ACCEPT))
        again = await client.session.call_tool("commit_import", {"handle": done}, allow_input_required=True)
        empty = server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]
        refused = await client.session.call_tool(
            "commit_import", {"handle": empty}, allow_input_required=True
        )
    assert not isinstance(again, InputRequiredResult) and not isinstance(refused, InputRequiredResult)
    replay = server.structured(again)
    assert (replay["status"], replay["operation_id"], replay["replayed"]) == (
        "committed",
        first["operation_id"],
        True,
    )
    assert server.error_text(refused).startswith("invalid_state:")
    assert len(legacy_engine.committed_batches()) == 1


# --- 2. single use ---------------------------------------------------------------------------------


SAID_NO = ElicitResult(action="accept", content={"confirm": False})


@pytest.mark.parametrize("refusal", [DECLINE, CANCEL, SAID_NO])
async def test_a_refused_round_replayed_as_accept_commits_nothing(
    server: Any, legacy_engine: Any, make_records: Any, refusal: ElicitResult
) -> None:
    async with server.client(elicitation_callback=lambda *a: ACCEPT) as client:
        handle = await server.stage(client, make_records(2))
        first = await ask(client, handle)
        declined = server.structured(await answer(client, handle, first, refusal))
        assert declined["status"] == "declined"
        replay = await answer(client, handle, first, ACCEPT)
        again = server.structured(await answer(client, handle, first, refusal))
        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
    assert server.error_text(replay).startswith("confirmation_used:")
    assert again["status"] == "declined", "the same answer again gets the same outcome"
    assert status["status"] == "open"
    assert all(op["kind"] != "commit" for op in status["operations"])
    assert legacy_engine.committed_batches() == []


async def test_a_declined_round_replayed_on_another_worker_still_commits_nothing(
    server: Any, other_server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(elicitation_callback=lambda *a: ACCEPT) as client:
        handle = await server.stage(client, make_records(2))
        first = await ask(client, handle)
        assert server.structured(await answer(client, handle, first, DECLINE))["status"] == "declined"
    async with other_server.client(elicitation_callback=lambda *a: ACCEPT) as elsewhere:
        replay = await answer(elsewhere, handle, first, ACCEPT)
    assert other_server.error_text(replay).startswith("confirmation_used:")
    assert legacy_engine.committed_batches() == []


async def test_an_accepted_round_delivered_to_two_workers_at_once_commits_once(
    server: Any, other_server: Any, legacy_engine: Any, make_records: Any
) -> None:
    records = make_records(5)
    results: list[Any] = []
    async with (
        server.client(elicitation_callback=lambda *a: ACCEPT) as one,
        other_server.client(elicitation_callback=lambda *a: ACCEPT) as two,
    ):
        handle = await server.stage(one, records)
        first = await ask(one, handle)

        async def deliver(client: Any) -> None:
            results.append(await answer(client, handle, first, ACCEPT))

        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver, one)
            tg.start_soon(deliver, two)
    answers = [server.structured(r) for r in results]
    assert {a["status"] for a in answers} <= {"committed", "in_progress"}
    assert len({a["operation_id"] for a in answers}) == 1
    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == records


async def test_a_decline_and_an_accept_of_one_round_racing_on_two_workers_have_one_outcome(
    server: Any, other_server: Any, legacy_engine: Any, make_records: Any
) -> None:
    results: dict[str, Any] = {}
    async with (
        server.client(elicitation_callback=lambda *a: ACCEPT) as one,
        other_server.client(elicitation_callback=lambda *a: ACCEPT) as two,
    ):
        handle = await server.stage(one, make_records(2))
        first = await ask(one, handle)

        async def deliver(name: str, client: Any, response: ElicitResult) -> None:
            results[name] = await answer(client, handle, first, response)

        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver, "decline", one, DECLINE)
            tg.start_soon(deliver, "accept", two, ACCEPT)
        status = server.structured(await one.call_tool("get_import_status", {"handle": handle}))
    refused = [name for name, r in results.items() if r.is_error]
    assert len(refused) == 1, "the round holds the first answer; the other is refused"
    assert server.error_text(results[refused[0]]).startswith("confirmation_used:")
    if refused == ["accept"]:
        assert server.structured(results["decline"])["status"] == "declined"
        assert (status["status"], legacy_engine.committed_batches()) == ("open", [])
    else:
        assert server.structured(results["accept"])["status"] == "committed"
        assert (status["status"], len(legacy_engine.committed_batches())) == ("committed", 1)


# --- requestState reused elsewhere -----------------------------------------------------------------


async def test_request_state_with_other_arguments_or_another_principal_is_refused(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(elicitation_callback=lambda *a: ACCEPT) as alice:
        handle = await server.stage(alice, make_records(2))
        other = await server.stage(alice, make_records(2))
        first = await ask(alice, handle)
        with pytest.raises(MCPError) as other_args:
            await answer(alice, other, first, ACCEPT)
    async with server.client(server.bob_token, elicitation_callback=lambda *a: ACCEPT) as bob:
        with pytest.raises(MCPError) as other_principal:
            await answer(bob, handle, first, ACCEPT)
    assert (other_args.value.code, other_principal.value.code) == (-32602, -32602)
    assert legacy_engine.committed_batches() == []


async def test_two_concurrent_rounds_on_two_imports_keep_their_answers_apart(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(elicitation_callback=lambda *a: ACCEPT) as client:
        kept = await server.stage(client, make_records(2, "kept"))
        dropped = await server.stage(client, make_records(3, "dropped"))
        kept_round, dropped_round = await ask(client, kept), await ask(client, dropped)
        assert "2 staged records" in message_of(kept_round)
        assert "3 staged records" in message_of(dropped_round)
        outcomes: dict[str, Any] = {}

        async def reply(name: str, handle: str, round_: InputRequiredResult, response: ElicitResult) -> None:
            outcomes[name] = server.structured(await answer(client, handle, round_, response))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reply, "dropped", dropped, dropped_round, DECLINE)
            tg.start_soon(reply, "kept", kept, kept_round, ACCEPT)
        with pytest.raises(MCPError):  # a state answers only the request it was issued for
            await answer(client, kept, dropped_round, ACCEPT)
        statuses = {
            h: server.structured(await client.call_tool("get_import_status", {"handle": h}))["status"]
            for h in (kept, dropped)
        }
    assert (outcomes["kept"]["status"], outcomes["kept"]["handle"]) == ("committed", kept)
    assert (outcomes["dropped"]["status"], outcomes["dropped"]["handle"]) == ("declined", dropped)
    assert statuses == {kept: "committed", dropped: "open"}
    [batch] = legacy_engine.committed_batches()
    assert [r["name"] for r in batch["records"]] == ["kept 0", "kept 1"]


# --- 3. the question is the server's -----------------------------------------------------------------


async def test_a_target_that_is_not_an_identifier_is_refused_at_begin(server: Any) -> None:
    async with server.client() as client:
        refused = await client.call_tool("begin_import", {"target": ATTACK})
        spaced = await client.call_tool("begin_import", {"target": "my customers"})
        fine = await client.call_tool("begin_import", {"target": "crm.customers/eu-1"})
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert server.error_text(refused).startswith("validation_error: target")
    assert server.error_text(spaced).startswith("validation_error: target")
    assert server.structured(fine)["target"] == "crm.customers/eu-1"
    assert tools["begin_import"].input_schema["properties"]["target"]["pattern"].startswith("^[A-Za-z0-9]")


async def test_a_stored_target_reaches_the_question_quoted_and_neutralised(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(elicitation_callback=lambda *a: ACCEPT) as client:
        handle = await server.stage(client, make_records(2))
        # A row from before the target rule (or from a port that relaxes it) holds the attack.
        with server.kit.store.unit_of_work() as uow:
            uow.session.execute(update(ImportRow).values(target=ATTACK))
            uow.commit()
        message = message_of(await ask(client, handle))
    assert message.startswith(
        "Commit 2 staged records into the legacy target \"customers'?\\u000a\\u000aTHIS IS A DRY RUN"
    )
    assert message.endswith("? The commit is final; it can only be voided later.")
    assert not any(unicodedata.category(ch)[0] in "CZ" and ch != " " for ch in message), message
    assert message.count('"') == 2, "the caller's text cannot close the quotes"
    assert "\\u202e" in message and "\\u2066" in message and "\\u200b" in message
    assert legacy_engine.committed_batches() == []


# --- 4. form mode only where declared ----------------------------------------------------------------


async def _commit_raw(server: Any, handle: str, capabilities: dict[str, Any]) -> Any:
    _, body = await server.raw(
        "tools/call",
        {"name": "commit_import", "arguments": {"handle": handle}},
        name="commit_import",
        capabilities=capabilities,
    )
    return body


@pytest.mark.parametrize("declared", [{"elicitation": {}}, {"elicitation": {"form": {}}}])
async def test_a_client_that_declared_form_mode_gets_the_form(
    server: Any, legacy_engine: Any, make_records: Any, declared: dict[str, Any]
) -> None:
    async with server.client() as client:
        handle = await server.stage(client, make_records(2))
    body = await _commit_raw(server, handle, declared)
    result = body["result"]
    assert result["resultType"] == "input_required"
    [request] = result["inputRequests"].values()
    assert request["method"] == "elicitation/create"
    assert request["params"].get("mode", "form") == "form"
    assert legacy_engine.committed_batches() == []


async def test_a_url_only_client_is_never_sent_a_form_and_gets_the_policy_fallback(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client() as client:
        handle = await server.stage(client, make_records(2))
    body = await _commit_raw(server, handle, {"elicitation": {"url": {}}})
    result = body["result"]
    assert result.get("resultType", "complete") == "complete", "no input_required, so no form"
    assert result["structuredContent"]["status"] == "committed"  # when-supported: as without elicitation
    assert len(legacy_engine.committed_batches()) == 1


@pytest.mark.parametrize("settings_overrides", [{"confirm_commit": "always"}])
async def test_always_refuses_a_url_only_client_with_32021_naming_form_mode(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client() as client:
        handle = await server.stage(client, make_records(2))
    body = await _commit_raw(server, handle, {"elicitation": {"url": {}}})
    assert body["error"]["code"] == -32021
    assert body["error"]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
    assert legacy_engine.committed_batches() == []
