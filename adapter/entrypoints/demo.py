"""``make demo``: the kit end to end, over real HTTP; tool calls go through the host kit (adapter.host).

It starts the legacy simulator as its own process (TCP), serves the kit's FastAPI app with uvicorn on
a free loopback port, and walks through what the kit exists for, each step checking its outcome:
stateless calls (a fresh client per step), handles bound to their principal, cacheable discovery,
idempotent replays, a confirmation (MRTR form elicitation) accepted and one declined, progress, a
replayed commit, the resource list, an abort that compensates, and a lost reply after COMMIT recorded
as ``outcome_unknown`` and then resolved through the status tool (the host kit's status action, never
a resend). Then seed 001's walkthrough (``demo_seed``): a second server process on the same database,
two overlapping commits whose progress stays apart, a client cache hit and a forced refresh; and no
``Mcp-Session-Id`` in any HTTP exchange of either server. Last (step 14), a long commit lands
through a host with a short request timeout (5 s, as openai-agents has): with the simulator slowed
down the commit takes longer than that, the server answers ``in_progress`` after its 4 s wait
budget, and the host kit follows it (``get_operation_status`` long-polled) until it reports
committed with exactly one legacy batch; then the same through a host that opts in to the Tasks
extension, which gets a task and follows it with ``tasks/get``. It exits non-zero if a step does
not hold.
Tool calls and resource reads go through the host kit; step 1 (the discovery cache hints) and the
seed walkthrough (steps 11-13: session headers, the SDK's own cache) use the SDK client directly,
because what they show is the wire itself.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult

from adapter.bootstrap import build
from adapter.config import load_settings
from adapter.entrypoints.demo_client import HostCaller
from adapter.entrypoints.demo_seed import HeaderWatch, second_server_process, seed_walkthrough, settings_env
from adapter.entrypoints.http.app import create_app
from adapter.host import CallState
from adapter.store.migrate import upgrade
from legacy_sim.client import LegacyClient
from legacy_sim.process import running_simulator

__all__ = ["run_demo"]


class DemoFailure(Exception):
    """A step did not behave as the kit promises."""


def check(condition: bool, what: str) -> None:
    if not condition:
        raise DemoFailure(what)
    print(f"   ok  {what}")


@asynccontextmanager
async def adapter_server(
    folder: Path, legacy: tuple[str, int], tokens: dict[str, Any], watch: Any, secret: str | None = None
) -> AsyncIterator[str]:
    """The kit served in this process; ``watch(app)`` wraps the app (the demo's header check)."""
    database = f"sqlite:///{folder}/adapter.db"
    upgrade(database)
    token_file = folder / "tokens.json"
    token_file.touch(mode=0o600)  # bearer tokens: readable by this user only, as the server asks
    token_file.write_text(json.dumps(tokens))
    settings = load_settings(
        database_url=database,
        legacy_url=f"tcp://{legacy[0]}:{legacy[1]}",
        secret=secret or secrets.token_hex(32),
        tokens=str(folder / "tokens.json"),
    )
    kit = build(settings)
    app = watch(create_app(kit))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task
        kit.close()


def client(url: str, token: str, **kwargs: Any) -> Client:
    """A new client per step: the server keeps no session, only what the handle names."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), **kwargs)


async def accept(ctx: Any, params: Any) -> ElicitResult:
    print(f"   [user is asked] {params.message} -> yes")
    return ElicitResult(action="accept", content={"confirm": True})


async def decline(ctx: Any, params: Any) -> ElicitResult:
    print(f"   [user is asked] {params.message} -> no")
    return ElicitResult(action="decline")


def plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


LONG_RECORDS = 200
LONG_LATENCY_MS = 30  # per legacy command: about 6 s of commit, past the host's 5 s timeout


async def long_commits(url: str, legacy: LegacyClient, alice: str) -> None:
    """Step 14: a commit longer than the host's request timeout lands, followed by the host kit."""
    call = HostCaller(url, {alice: "alice"})
    print("14. a commit longer than the host's 5 s request timeout lands: followed, never failed")
    try:
        for tasks in (False, True):
            handle = (await call(url, alice, "begin_import", {"target": "customers"}))["handle"]
            rows = [{"customer_id": i, "name": f"Customer {i}"} for i in range(LONG_RECORDS)]
            await call(url, alice, "add_records", {"handle": handle, "records": rows})
            legacy.faults(latency_ms=LONG_LATENCY_MS)
            try:
                followed = await call.commit_and_follow(url, alice, handle, tasks=tasks)
            finally:
                legacy.faults(latency_ms=0)
            done = followed.call
            how = "tasks/get" if tasks else "get_operation_status(wait_seconds=4)"
            kind = "with tasks declared" if tasks else "plain"
            check(
                followed.first is CallState.RUNNING and followed.answered_after < 5.0,
                f"{kind}: commit_import answered {followed.first_answer} after "
                f"{followed.answered_after:.1f} s, inside the 5 s timeout: running, not failed",
            )
            result = done.structured if isinstance(done.structured, dict) else {}
            operation = result.get("operation_id") if tasks else done.operation_id
            landed = result.get("status") == "committed" if tasks else done.server_status == "succeeded"
            check(
                done.state is CallState.COMPLETED and landed,
                f"followed with {how} ({followed.questions} {plural(followed.questions, 'request')}): "
                f"committed after {followed.seconds:.1f} s",
            )
            batches = legacy.status(f"adp-{operation}")["batches"]
            check(
                len(batches) == 1 and batches[0]["record_count"] == LONG_RECORDS,
                f"exactly one legacy batch with all {LONG_RECORDS} records",
            )
    finally:
        await call.aclose()


async def scenarios(url: str, legacy: LegacyClient, alice: str, bob: str, total: int) -> None:
    call = HostCaller(url, {alice: "alice", bob: "bob"})  # every tool call goes through the host kit
    print("1. discovery is cacheable: tools/list says for how long and for whom")
    async with client(url, alice) as c:
        discover = c.session.discover_result
        tools = await c.session.list_tools()
        check(
            tools.cache_scope == "public" and (tools.ttl_ms or 0) > 0,
            f"tools/list ttlMs={tools.ttl_ms} public",
        )
        check(discover is not None and discover.cache_scope == "public", "server/discover is cacheable too")
        print(f"   {len(tools.tools)} tools: {', '.join(t.name for t in tools.tools)}")

    print("2. begin_import returns an opaque handle; a replay (same key) returns the same one")
    begun = await call(url, alice, "begin_import", {"target": "customers", "idempotency_key": "demo-begin"})
    again = await call(url, alice, "begin_import", {"target": "customers", "idempotency_key": "demo-begin"})
    handle = begun["handle"]
    check(again["handle"] == handle and again["replayed"], f"same handle on replay ({handle[:12]}...)")

    print("3. the handle is bound to its principal: bob gets the same answer as for an unknown handle")
    theirs = await call(url, bob, "get_import_status", {"handle": handle})
    unknown = await call(url, bob, "get_import_status", {"handle": "imp_" + "x" * 32})
    check(theirs == unknown and theirs["error"].startswith("handle_not_found:"), theirs["error"])

    print(f"4. stage {total} records in batches (separate requests, any worker could serve them)")
    rows = [{"customer_id": i, "name": f"Customer {i}"} for i in range(total)]
    for start in range(0, total, 500):
        batch = {
            "handle": handle,
            "records": rows[start : start + 500],
            "idempotency_key": f"demo-add-{start}",
        }
        await call(url, alice, "add_records", batch)
    replay = await call(
        url, alice, "add_records", {"handle": handle, "records": rows[:500], "idempotency_key": "demo-add-0"}
    )
    status = await call(url, alice, "get_import_status", {"handle": handle})
    check(
        replay["replayed"] and status["record_count"] == total, f"{total} staged; the replay staged nothing"
    )

    print("5. commit asks the user to confirm (input_required), then reports progress")
    steps: list[float] = []
    asked: list[str] = []

    async def on_progress(progress: float, of: float | None, message: str | None) -> None:
        steps.append(progress)

    async def accept_and_note(ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return await accept(ctx, params)

    committed = await call(
        url,
        alice,
        "commit_import",
        {"handle": handle, "idempotency_key": "demo-commit"},
        elicitation_callback=accept_and_note,
        progress_callback=on_progress,
    )
    print(f"   progress: {', '.join(str(int(s)) for s in steps)} of {total}")
    check(len(asked) == 1 and f"Commit {total} staged records" in asked[0], "the user was asked, once")
    check(steps[:1] == [0] and steps[-1:] == [total], f"progress arrived: 0 .. {total} of {total}")
    check(
        committed.get("status") == "committed",
        f"committed as legacy batch {committed.get('legacy_batch_id')}",
    )

    print("6. a retried commit returns the recorded result; the legacy system holds one batch")
    retried = await call(url, alice, "commit_import", {"handle": handle, "idempotency_key": "demo-commit"})
    batches = legacy.status(f"adp-{committed['operation_id']}")["batches"]
    check(retried["replayed"] and retried["legacy_batch_id"] == committed["legacy_batch_id"], "replayed")
    check(len(batches) == 1 and batches[0]["record_count"] == total, "exactly one legacy batch")

    print("7. a declined confirmation leaves the import open and commits nothing")
    other = (await call(url, alice, "begin_import", {"target": "suppliers"}))["handle"]
    await call(url, alice, "add_record", {"handle": other, "record": {"supplier": 1}})
    declined = await call(url, alice, "commit_import", {"handle": other}, elicitation_callback=decline)
    status = await call(url, alice, "get_import_status", {"handle": other})
    check(declined["status"] == "declined" and status["status"] == "open", "declined; still open")

    print("8. imports are resources: import://{handle}, listed newest first, per principal")
    listed = await call.list_resources(alice)  # through the host kit: policy, then its cache, then the server
    read = await call.read_resource(alice, f"import://{handle}")
    check(
        [r.uri for r in listed.resources][:2] == [f"import://{other}", f"import://{handle}"],
        "alice's two imports",
    )
    check(json.loads(read.contents[0].text)["status"] == "committed", "the resource shows the state")  # type: ignore[union-attr]

    print("9. abort of a committed import compensates: the legacy batch is voided")
    aborted = await call(url, alice, "abort_import", {"handle": handle})
    check(aborted["status"] == "compensated", "compensated")
    check(legacy.status(f"adp-{committed['operation_id']}")["batches"][0]["voided"], "legacy batch voided")

    print("10. a reply lost after COMMIT is outcome_unknown, never failed")
    legacy.faults(drop_after_commit=1.0)
    lost = await call(url, alice, "commit_import", {"handle": other})
    legacy.faults(drop_after_commit=0.0)
    check(lost["status"] == "outcome_unknown", "outcome_unknown")
    lost_call = call.last
    assert lost_call is not None
    resolved = lost_call
    action = lost_call.status_action
    check(
        lost_call.state is CallState.OUTCOME_UNKNOWN and action is not None,
        f"the host kit offers a status action ({action.tool if action else None}), not a retry",
    )
    for _ in range(60):  # the server's reconciler settles it; the host only asks, it never resends
        resolved = await call.resolve(alice, lost_call)
        if resolved.state is not CallState.OUTCOME_UNKNOWN:
            break
        if _ == 0:
            print(f"   status tool says {resolved.server_status}; asking again until the server knows")
        await asyncio.sleep(0.5)
    check(
        resolved.state is CallState.COMPLETED,
        f"resolved through {action.tool if action else None}: {resolved.server_status}",
    )
    history = await call(url, alice, "get_operation_status", {"operation_id": lost["operation_id"]})
    print("   history:", ", ".join(entry["event"] for entry in history["history"]))
    truth = legacy.status(f"adp-{lost['operation_id']}")
    print(
        f"   asked directly, the legacy system says committed={truth['committed']}: reconciliation records it"
    )


def run_demo(records: int = 1200) -> int:
    alice, bob = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    secret = secrets.token_hex(32)  # shared by both server processes (seed 001, step 1)
    tokens = {alice: {"principal": "alice", "tenant": "acme"}, bob: {"principal": "bob", "tenant": "acme"}}
    with (
        tempfile.TemporaryDirectory(prefix="adapter-demo-") as tmp,
        running_simulator(Path(tmp) / "legacy.db") as legacy,
    ):

        async def main() -> None:
            watches: list[HeaderWatch] = []

            def watch(app: Any) -> HeaderWatch:
                watches.append(HeaderWatch(app))
                return watches[-1]

            async with adapter_server(Path(tmp), legacy, tokens, watch, secret) as url:
                print(f"legacy simulator over TCP at {legacy[0]}:{legacy[1]}; MCP server at {url}")
                simulator = LegacyClient(*legacy, timeout=5.0)
                await scenarios(url, simulator, alice, bob, records)
                env = settings_env(f"sqlite:///{tmp}/adapter.db", legacy, secret, Path(tmp) / "tokens.json")
                async with second_server_process(env) as second:
                    print(f"a second server process at {second}, on the same database")
                    await seed_walkthrough((url, second), alice, check, simulator)
                await long_commits(url, simulator, alice)
            [seen] = watches
            check(
                seen.requests > 0 and seen.session_headers == 0,
                f"no Mcp-Session-Id in the first server's {seen.requests} HTTP exchanges, all steps",
            )

        try:
            asyncio.run(main())
        except DemoFailure as exc:
            print(f"FAILED: {exc}", file=sys.stderr)
            return 1
    print("demo finished: every step behaved as promised")
    return 0
