"""Promised notifications are sent: the import list's ``list_changed`` reaches its owner's streams only.

What is not sent (tool and prompt list changes) is not advertised or acknowledged either. A lost
listen stream is not replayed: the client re-reads from the source, as the server tells it to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from sqlalchemy import update

from adapter.bootstrap import Kit
from adapter.entrypoints.http.app import create_app
from adapter.store.tables import ImportRow
from tests.mcp.conftest import Running
from tests.support.servers import serve_in_process

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server(kit: Kit) -> AsyncIterator[Running]:
    """The server without its maintenance loop, so a test decides when expiry and the purge run.

    The loop's first pass runs at start; on a loaded machine it came after a test had backdated an
    import and purged it first, so the test's own pass found nothing (an interval of an hour, the
    earlier way to keep it out, does not delay that first pass)."""
    async with serve_in_process(create_app(kit, run_maintenance=False)) as base_url:
        yield Running(base_url, kit)


async def events_within(subscription: Any, seconds: float) -> list[Any]:
    """Every event that arrives within ``seconds`` (a bounded wait: proves that nothing came)."""
    seen: list[Any] = []
    with anyio.move_on_after(seconds):
        async for event in subscription:
            seen.append(event)
    return seen


async def next_list_change(subscription: Any) -> None:
    with anyio.fail_after(10):
        async for event in subscription:
            if isinstance(event, ResourcesListChanged):
                return


async def begin(server: Any, client: Any) -> str:
    return server.structured(await client.call_tool("begin_import", {"target": "customers"}))["handle"]


async def test_discover_advertises_only_the_resource_list_as_changing(server: Any) -> None:
    _, body = await server.raw("server/discover")
    capabilities = body["result"]["capabilities"]
    assert capabilities["resources"].get("listChanged") is True
    assert "listChanged" not in capabilities["tools"]
    assert "listChanged" not in capabilities["prompts"]
    assert "re-read" in body["result"]["instructions"]


async def test_listen_acknowledges_the_resource_list_but_not_the_fixed_tool_and_prompt_lists(
    server: Any,
) -> None:
    async with (
        server.client() as client,
        client.listen(
            tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
        ) as subscription,
    ):
        honored = subscription.honored
    assert honored.resources_list_changed is True
    assert honored.tools_list_changed is None and honored.prompts_list_changed is None


async def test_a_new_import_tells_only_its_owners_streams_that_their_list_changed(server: Any) -> None:
    async with (
        server.client() as alice,
        server.client(server.bob_token) as bob,
        alice.listen(resources_list_changed=True) as alice_sub,
        bob.listen(resources_list_changed=True) as bob_sub,
    ):
        await begin(server, alice)
        await next_list_change(alice_sub)
        assert not [e for e in await events_within(bob_sub, 1.0) if isinstance(e, ResourcesListChanged)]

        await begin(server, bob)
        await next_list_change(bob_sub)
        assert not [e for e in await events_within(alice_sub, 1.0) if isinstance(e, ResourcesListChanged)]


async def test_expiry_and_purge_tell_the_owner_their_list_changed(server: Any) -> None:
    kit = server.kit
    async with server.client() as alice:
        expiring = await begin(server, alice)
        purged = await begin(server, alice)
        await alice.call_tool("abort_import", {"handle": purged})
        past = datetime.now(UTC) - timedelta(days=30)
        with kit.store.unit_of_work() as uow:
            digest = kit.service.ctx.codec.digest
            uow.session.execute(
                update(ImportRow).where(ImportRow.handle_digest == digest(expiring)).values(expires_at=past)
            )
            uow.session.execute(  # begun, aborted and expiring a month ago, as the purge sees it
                update(ImportRow)
                .where(ImportRow.handle_digest == digest(purged))
                .values(created_at=past, updated_at=past, expires_at=past)
            )
            uow.commit()
        async with alice.listen(resources_list_changed=True) as subscription:
            report = await anyio.to_thread.run_sync(kit.service.maintain)
            assert report.expired == 1
            await next_list_change(subscription)

            report = await anyio.to_thread.run_sync(lambda: kit.service.maintain(retention=timedelta(days=7)))
            assert report.purged is not None and report.purged.imports == 1
            await next_list_change(subscription)
        listed = {r.uri for r in (await alice.list_resources()).resources}
    assert f"import://{purged}" not in listed
    assert f"import://{expiring}" in listed


async def test_a_change_made_while_no_stream_was_open_is_not_replayed_and_a_re_read_shows_it(
    server: Any,
) -> None:
    async with server.client() as alice:
        handle = await begin(server, alice)
        uri = f"import://{handle}"
        async with alice.listen(resource_subscriptions=[uri]) as first:
            assert first.honored.resource_subscriptions == [uri]
        # The stream is gone; the import changes meanwhile. Bob's later change is a barrier: once
        # his notification arrived, the feed has passed alice's change too (it reads events in order).
        async with server.client(server.bob_token) as bob, bob.listen(resources_list_changed=True) as barrier:
            await alice.call_tool("add_record", {"handle": handle, "record": {"id": 1}})
            await begin(server, bob)
            await next_list_change(barrier)
        async with alice.listen(resource_subscriptions=[uri]) as second:
            missed = await events_within(second, 1.0)
            assert missed == [], "no replay: the server never claims a gap-free history"
            body = (await alice.read_resource(uri)).contents[0]
            assert '"record_count": 1' in body.text  # type: ignore[union-attr]
            await alice.call_tool("add_record", {"handle": handle, "record": {"id": 2}})
            with anyio.fail_after(10):
                event = await second.__anext__()
    assert isinstance(event, ResourceUpdated) and event.uri == uri
