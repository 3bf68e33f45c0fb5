"""The 2025 era (initialize handshake) on the same endpoint: the Python SDK's client in legacy mode.

Same tools, handles, idempotency and store as the 2026-07-28 era; the confirmation is asked inside
the request with ``elicitation/create``; progress, cancellation, subscriptions and list changes
travel on the session. Plus the era setting (``protocol_eras``) and the unknown session id (404).
Where the declared capabilities matter (URL-mode elicitation only), raw JSON-RPC over httpx.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp_types import ElicitRequestFormParams, ElicitResult

# resources/subscribe is the 2025 era's API; the SDK warns that 2026-07-28 removed it.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

ACCEPT = ElicitResult(action="accept", content={"confirm": True})
LEGACY = "2025-11-25"


def answering(result: ElicitResult, asked: list[str], before: Any = None) -> Any:
    async def callback(ctx: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestFormParams)
        asked.append(params.message)
        if before is not None:
            await before(len(asked))
        return result

    return callback


class Heard:
    """A message handler keeping the server notifications a legacy session receives."""

    def __init__(self) -> None:
        self.methods: list[tuple[str, Any]] = []
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if method is not None:
            self.methods.append((method, getattr(message, "params", None)))
            self.event.set()

    async def wait_for(self, method: str, uri: str | None = None) -> None:
        with anyio.fail_after(10):
            while not any(
                m == method and (uri is None or str(getattr(p, "uri", "")) == uri) for m, p in self.methods
            ):
                self.event = anyio.Event()
                await self.event.wait()


async def test_a_legacy_client_runs_the_whole_flow_with_one_confirmation_and_one_batch(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    asked: list[str] = []
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    records = make_records(1200)
    async with server.client(mode="legacy", elicitation_callback=answering(ACCEPT, asked)) as client:
        assert client.session.protocol_version == LEGACY  # type: ignore[attr-defined]
        handle = await server.stage(client, records)
        committed = server.structured(
            await client.call_tool(
                "commit_import", {"handle": handle, "idempotency_key": "k1"}, progress_callback=on_progress
            )
        )
        replay = server.structured(
            await client.call_tool("commit_import", {"handle": handle, "idempotency_key": "k1"})
        )
    assert committed["status"] == "committed"
    assert (replay["replayed"], replay["legacy_batch_id"]) == (True, committed["legacy_batch_id"])
    assert len(asked) == 1 and "1200 staged records" in asked[0] and '"customers"' in asked[0]
    assert seen and seen[-1] == 1200 and seen == sorted(seen)
    [batch] = legacy_engine.committed_batches()
    assert batch["records"] == records


async def test_a_declined_confirmation_commits_nothing_in_the_legacy_era(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    asked: list[str] = []
    decline = ElicitResult(action="decline")
    async with server.client(mode="legacy", elicitation_callback=answering(decline, asked)) as client:
        handle = await server.stage(client, make_records(2))
        declined = server.structured(await client.call_tool("commit_import", {"handle": handle}))
        status = server.structured(await client.call_tool("get_import_status", {"handle": handle}))
    assert (declined["status"], declined["legacy_batch_id"]) == ("declined", None)
    assert len(asked) == 1
    assert (status["status"], status["record_count"]) == ("open", 2)
    assert legacy_engine.committed_batches() == []


async def test_records_added_while_the_question_is_open_are_asked_about_again(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    """An accept of "2 records" does not commit 3: the server re-reads and asks with the new count."""
    asked: list[str] = []
    handle_box: list[str] = []

    async def add_one_during_the_first_question(round_: int) -> None:
        if round_ == 1:
            async with server.client() as other:  # another session (2026-07-28) of the same caller
                await other.call_tool("add_record", {"handle": handle_box[0], "record": {"late": True}})

    callback = answering(ACCEPT, asked, before=add_one_during_the_first_question)
    async with server.client(mode="legacy", elicitation_callback=callback) as client:
        handle_box.append(await server.stage(client, make_records(2)))
        committed = server.structured(await client.call_tool("commit_import", {"handle": handle_box[0]}))
    assert [("2 staged" in a, "3 staged" in a) for a in asked] == [(True, False), (False, True)]
    assert (committed["status"], committed["record_count"]) == ("committed", 3)
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == 3


@pytest.mark.parametrize("settings_overrides", [{"confirm_max_rounds": 1}])
async def test_a_changed_import_after_the_last_allowed_round_is_refused(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    handle_box: list[str] = []

    async def add_one(round_: int) -> None:
        async with server.client() as other:
            await other.call_tool("add_record", {"handle": handle_box[0], "record": {"late": round_}})

    async with server.client(mode="legacy", elicitation_callback=answering(ACCEPT, [], add_one)) as client:
        handle_box.append(await server.stage(client, make_records(2)))
        refused = await client.call_tool("commit_import", {"handle": handle_box[0]})
        status = server.structured(await client.call_tool("get_import_status", {"handle": handle_box[0]}))
    assert server.error_text(refused).startswith("confirmation_stale:"), "the same code as at 2026-07-28"
    assert (status["status"], status["record_count"]) == ("open", 3)
    assert legacy_engine.committed_batches() == []


@pytest.mark.parametrize("settings_overrides", [{"confirm_commit": "always"}])
async def test_policy_always_refuses_a_legacy_client_without_elicitation(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(mode="legacy") as client:  # no elicitation callback: not declared
        handle = await server.stage(client, make_records(1))
        with pytest.raises(Exception) as refused:
            await client.call_tool("commit_import", {"handle": handle})
    assert getattr(refused.value, "code", None) == -32021
    assert legacy_engine.committed_batches() == []


async def test_a_legacy_client_without_elicitation_commits_under_when_supported(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    async with server.client(mode="legacy") as client:
        handle = await server.stage(client, make_records(1))
        committed = server.structured(await client.call_tool("commit_import", {"handle": handle}))
    assert committed["status"] == "committed"
    assert len(legacy_engine.committed_batches()) == 1


async def _legacy_commit_raw(server: Any, handle: str, capabilities: dict[str, Any]) -> list[Any]:
    """A 2025-era session that declared ``capabilities`` at initialize commits ``handle``.

    Returns the messages of the ``tools/call`` response stream up to its answer, or up to a question
    (``elicitation/create``), which nobody here answers: the stream is left there.
    """
    initialize = _legacy_initialize()
    initialize["params"]["capabilities"] = capabilities
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {server.alice_token}",
    }
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    call["params"] = {"name": "commit_import", "arguments": {"handle": handle}}
    messages: list[Any] = []
    async with httpx.AsyncClient(timeout=30.0) as http:
        opened = await http.post(server.url, json=initialize, headers=headers)
        headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        await http.post(
            server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        async with http.stream("POST", server.url, json=call, headers=headers) as answer:
            if not answer.headers.get("content-type", "").startswith("text/event-stream"):
                return [json.loads(await answer.aread())]
            async for line in answer.aiter_lines():
                if line.startswith("data:"):
                    messages.append(json.loads(line[5:]))
                    if messages[-1].get("id") == 2 or messages[-1].get("method") == "elicitation/create":
                        break
    return messages


async def _url_only_commit_answer(server: Any, make_records: Any) -> dict[str, Any]:
    """The answer to commit_import from a 2025 client that declared URL-mode elicitation only;
    fails if the server sent that client a form question."""
    async with server.client() as client:
        handle = await server.stage(client, make_records(2))
    messages = await _legacy_commit_raw(server, handle, {"elicitation": {"url": {}}})
    assert not [m for m in messages if m.get("method") == "elicitation/create"], messages
    [answer] = [m for m in messages if m.get("id") == 2]
    return dict(answer)


async def test_a_legacy_client_that_declared_url_mode_only_is_never_sent_a_form(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    answer = await _url_only_commit_answer(server, make_records)
    assert answer["result"]["structuredContent"]["status"] == "committed"  # when-supported: not asked
    assert len(legacy_engine.committed_batches()) == 1


@pytest.mark.parametrize("settings_overrides", [{"confirm_commit": "always"}])
async def test_policy_always_refuses_a_legacy_client_that_declared_url_mode_only(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    answer = await _url_only_commit_answer(server, make_records)
    assert answer["error"]["code"] == -32021
    assert answer["error"]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
    assert legacy_engine.committed_batches() == []


async def test_a_legacy_client_that_declared_form_mode_is_asked_with_a_form(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    """The control: the same raw session, declaring form mode, does get the question (unanswered)."""
    async with server.client() as client:
        handle = await server.stage(client, make_records(2))
    messages = await _legacy_commit_raw(server, handle, {"elicitation": {"form": {}}})
    question = messages[-1]
    assert question["method"] == "elicitation/create"
    assert question["params"].get("mode", "form") == "form"
    assert "Commit 2 staged records" in question["params"]["message"]
    assert legacy_engine.committed_batches() == []


async def test_a_cancelled_legacy_commit_is_recorded_as_cancelled(
    server: Any, legacy_engine: Any, make_records: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapter.requests")
    records = make_records(3000)
    first_progress = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        first_progress.set()

    async with server.client(mode="legacy") as client:
        handle = await server.stage(client, records)
        legacy_engine.update_faults(latency_ms=2)

        async def commit() -> None:
            await client.call_tool(
                "commit_import",
                {"handle": handle, "idempotency_key": "cancel-me"},
                progress_callback=on_progress,
            )

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(commit)
                await first_progress.wait()
                tasks.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
        status = None
        with anyio.fail_after(20):
            while status not in ("cancelled", "succeeded", "outcome_unknown", "failed"):
                await anyio.sleep(0.1)
                op = server.structured(
                    await client.call_tool("get_operation_status", {"idempotency_key": "cancel-me"})
                )
                status = op["status"]
        legacy_engine.update_faults(latency_ms=0)
    assert status == "cancelled"
    assert legacy_engine.committed_batches() == []
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "adapter.requests"]
    assert [line["outcome"] for line in lines if line["tool"] == "commit_import"] == ["cancelled"]


async def test_resources_paginate_and_subscriptions_and_list_changes_reach_a_legacy_session(
    server: Any, make_records: Any
) -> None:
    heard = Heard()
    async with server.client(mode="legacy", message_handler=heard) as client:
        handles = [
            server.structured(await client.call_tool("begin_import", {"target": f"t{i}"}))["handle"]
            for i in range(4)
        ]
        first = await client.list_resources()
        assert len(first.resources) == 3 and first.next_cursor  # page_size=3 in the harness
        second = await client.list_resources(cursor=first.next_cursor)
        listed = {str(r.uri) for r in [*first.resources, *second.resources]}
        assert listed == {f"import://{h}" for h in handles}
        uri = f"import://{handles[0]}"
        body = json.loads((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
        assert (body["status"], body["target"]) == ("open", "t0")

        await client.subscribe_resource(uri)
        await client.call_tool("add_record", {"handle": handles[0], "record": {"a": 1}})
        await heard.wait_for("notifications/resources/updated", uri)

        unsubscribed_uri = f"import://{handles[1]}"
        heard.methods.clear()
        await client.call_tool("add_record", {"handle": handles[1], "record": {"a": 1}})
        await client.call_tool("begin_import", {"target": "t4"})  # the list itself changes: a new import
        await heard.wait_for("notifications/resources/list_changed")  # after the add's event, in order
        assert ("notifications/resources/updated", unsubscribed_uri) not in [
            (m, str(getattr(p, "uri", ""))) for m, p in heard.methods
        ]


async def test_another_callers_import_cannot_be_subscribed_and_an_unknown_handle_is_an_error(
    server: Any,
) -> None:
    async with server.client() as alice:
        handle = server.structured(await alice.call_tool("begin_import", {"target": "t"}))["handle"]
    async with server.client(token=server.bob_token, mode="legacy") as bob:
        with pytest.raises(Exception) as refused:
            await bob.subscribe_resource(f"import://{handle}")
        assert getattr(refused.value, "code", None) == -32602
        status = await bob.call_tool("get_import_status", {"handle": handle})
    assert server.error_text(status).startswith("handle_not_found:")


def _legacy_initialize(request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


async def test_an_unknown_session_id_gets_404_so_the_client_initializes_again(server: Any) -> None:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {server.alice_token}",
        "MCP-Protocol-Version": LEGACY,
        "Mcp-Session-Id": "0" * 32,
    }
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    async with httpx.AsyncClient() as http:
        response = await http.post(server.url, json=ping, headers=headers)
        assert response.status_code == 404
        del headers["Mcp-Session-Id"], headers["MCP-Protocol-Version"]
        fresh = await http.post(server.url, json=_legacy_initialize(), headers=headers)
    assert fresh.status_code == 200
    assert fresh.headers.get("mcp-session-id")


async def test_the_initialize_result_names_the_version_and_announces_subscribe_and_list_changed(
    server: Any,
) -> None:
    async with server.client(mode="legacy") as client:
        result = client.session.initialize_result  # type: ignore[attr-defined]
    assert result.protocol_version == LEGACY
    assert result.capabilities.resources.subscribe is True
    assert result.capabilities.resources.list_changed is True


@pytest.mark.parametrize("settings_overrides", [{"protocol_eras": "modern"}])
async def test_modern_only_refuses_the_handshake_naming_2026_07_28(server: Any) -> None:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {server.alice_token}",
    }
    async with httpx.AsyncClient() as http:
        response = await http.post(server.url, json=_legacy_initialize(7), headers=headers)
        get = await http.get(server.url, headers={"Accept": "text/event-stream", **headers})
    assert response.status_code == 400
    body = response.json()
    assert (body["id"], body["error"]["code"]) == (7, -32022)
    assert body["error"]["data"] == {"supported": ["2026-07-28"], "requested": LEGACY}
    assert "2026-07-28" in body["error"]["message"]
    assert get.status_code == 405
    async with server.client() as modern:
        assert (await modern.list_tools()).tools


@pytest.mark.parametrize("settings_overrides", [{"protocol_eras": "legacy"}])
async def test_legacy_only_refuses_a_2026_request_naming_the_handshake_versions(server: Any) -> None:
    response, body = await server.raw("tools/list", {})
    assert response.status_code == 400
    assert body["error"]["code"] == -32022
    assert body["error"]["data"]["supported"][0] == LEGACY
    assert "2026-07-28" not in body["error"]["data"]["supported"]
    async with server.client(mode="legacy") as client:
        assert (await client.list_tools()).tools


async def test_a_version_nobody_serves_is_refused_naming_the_served_versions(server: Any) -> None:
    response, body = await server.raw("tools/list", {}, headers={"MCP-Protocol-Version": "2099-01-01"})
    assert response.status_code == 400
    assert body["error"]["code"] == -32022
    # data.supported is what server/discover lists (a 2026-07-28 client checks that); the message
    # names the handshake versions too.
    assert body["error"]["data"]["supported"] == ["2026-07-28"]
    assert body["error"]["data"]["requested"] == "2099-01-01"
    assert "2026-07-28" in body["error"]["message"] and LEGACY in body["error"]["message"]


async def test_both_eras_share_handles_and_idempotency(server: Any, legacy_engine: Any) -> None:
    async with server.client(mode="legacy") as old, server.client() as new:
        assert isinstance(old, Client)
        begun = server.structured(
            await old.call_tool("begin_import", {"target": "c", "idempotency_key": "b1"})
        )
        again = server.structured(
            await new.call_tool("begin_import", {"target": "c", "idempotency_key": "b1"})
        )
        assert (again["handle"], again["replayed"]) == (begun["handle"], True)
        await new.call_tool("add_record", {"handle": begun["handle"], "record": {"x": 1}})
        seen = server.structured(await old.call_tool("get_import_status", {"handle": begun["handle"]}))
    assert seen["record_count"] == 1
