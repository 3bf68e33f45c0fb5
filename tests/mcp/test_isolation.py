"""Principals never see each other's imports: not by handle, not by URI, not by subscription."""

from __future__ import annotations

import base64
import secrets
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, InputRequiredResult

pytestmark = pytest.mark.anyio


def unknown_handle() -> str:
    return "imp_" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


async def test_another_principals_handle_looks_exactly_like_an_unknown_one(
    server: Any, legacy_engine: Any
) -> None:
    async with server.client() as alice:
        handle = server.structured(await alice.call_tool("begin_import", {"target": "customers"}))["handle"]
        await alice.call_tool("add_record", {"handle": handle, "record": {"a": 1}})
    calls = [
        ("add_record", {"record": {"b": 2}}),
        ("add_records", {"records": [{"b": 2}]}),
        ("commit_import", {}),
        ("get_import_status", {}),
        ("abort_import", {}),
    ]
    async with server.client(server.bob_token) as bob:
        for tool, extra in calls:
            foreign = server.error_text(await bob.call_tool(tool, {"handle": handle, **extra}))
            unknown = server.error_text(await bob.call_tool(tool, {"handle": unknown_handle(), **extra}))
            assert foreign.startswith("handle_not_found: "), (tool, foreign)
            assert foreign == unknown, tool
        with pytest.raises(MCPError) as read:
            await bob.read_resource(f"import://{handle}")
        with pytest.raises(MCPError) as read_unknown:
            await bob.read_resource(f"import://{unknown_handle()}")
        assert (read.value.code, read.value.message) == (-32602, "Resource not found")
        assert (read_unknown.value.code, read_unknown.value.message) == (-32602, "Resource not found")
        assert (await bob.list_resources()).resources == []
    async with server.client() as alice:
        status = server.structured(await alice.call_tool("get_import_status", {"handle": handle}))
    assert (status["status"], status["record_count"]) == ("open", 1), "bob changed nothing"
    assert legacy_engine.committed_batches() == []


async def test_listen_honors_only_the_callers_own_imports(server: Any) -> None:
    async with server.client() as alice, server.client(server.bob_token) as bob:
        alice_handle = server.structured(await alice.call_tool("begin_import", {"target": "a"}))["handle"]
        bob_handle = server.structured(await bob.call_tool("begin_import", {"target": "b"}))["handle"]
        alice_uri, bob_uri = f"import://{alice_handle}", f"import://{bob_handle}"
        async with (
            alice.listen(resource_subscriptions=[alice_uri]) as alice_sub,
            bob.listen(resource_subscriptions=[alice_uri, bob_uri]) as bob_sub,
        ):
            assert alice_sub.honored.resource_subscriptions == [alice_uri]
            assert bob_sub.honored.resource_subscriptions == [bob_uri]

            await alice.call_tool("add_record", {"handle": alice_handle, "record": {"a": 1}})
            with anyio.fail_after(5):
                event = await alice_sub.__anext__()
            assert event.uri == alice_uri

            # Bob's stream is live (his own change arrives) yet carries nothing about alice's import.
            await bob.call_tool("add_record", {"handle": bob_handle, "record": {"b": 1}})
            bob_events: list[str] = []
            with anyio.fail_after(5):
                bob_events.append((await bob_sub.__anext__()).uri)
            await alice.call_tool("add_record", {"handle": alice_handle, "record": {"a": 2}})
            with anyio.fail_after(5):
                assert (await alice_sub.__anext__()).uri == alice_uri  # published while bob listens
            with anyio.move_on_after(0.6):
                while True:
                    bob_events.append((await bob_sub.__anext__()).uri)
            assert alice_uri not in bob_events
            assert set(bob_events) == {bob_uri}


async def test_concurrent_principals_with_different_capabilities_never_mix(
    server: Any, legacy_engine: Any, make_records: Any
) -> None:
    alice_records, bob_records = make_records(5, "alice"), make_records(7, "bob")
    bob_done = anyio.Event()
    asked: list[str] = []
    results: dict[str, Any] = {}

    async def confirm_after_bob(ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        with anyio.fail_after(10):
            await bob_done.wait()  # alice's question is pending while bob commits
        return ElicitResult(action="accept", content={"confirm": True})

    async with (
        server.client(elicitation_callback=confirm_after_bob) as alice,
        server.client(server.bob_token) as bob,
    ):
        alice_handle = await server.stage(alice, alice_records)
        bob_handle = await server.stage(bob, bob_records)

        async def alice_commit() -> None:
            first = await alice.session.call_tool(
                "commit_import", {"handle": alice_handle}, allow_input_required=True
            )
            results["alice_first"] = first
            results["alice"] = await alice.call_tool("commit_import", {"handle": alice_handle})

        async def bob_commit() -> None:
            try:
                results["bob"] = await bob.call_tool("commit_import", {"handle": bob_handle})
            finally:
                bob_done.set()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(alice_commit)
                tasks.start_soon(bob_commit)

        alice_listed = [r.uri for r in (await alice.list_resources()).resources]
        bob_listed = [r.uri for r in (await bob.list_resources()).resources]

    assert isinstance(results["alice_first"], InputRequiredResult), "alice's client can confirm: asked"
    assert len(asked) == 1 and "5 staged records" in asked[0]
    alice_out, bob_out = server.structured(results["alice"]), server.structured(results["bob"])
    assert (alice_out["handle"], alice_out["status"], alice_out["record_count"]) == (
        alice_handle,
        "committed",
        5,
    )
    assert (bob_out["handle"], bob_out["status"], bob_out["record_count"]) == (bob_handle, "committed", 7)
    assert alice_listed == [f"import://{alice_handle}"]
    assert bob_listed == [f"import://{bob_handle}"]
    batches = {b["legacy_batch_id"]: b["records"] for b in legacy_engine.committed_batches()}
    assert batches == {alice_out["legacy_batch_id"]: alice_records, bob_out["legacy_batch_id"]: bob_records}
