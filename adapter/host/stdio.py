"""stdio servers: local child processes the host starts, keeps apart per principal and ends.

The SDK's ``stdio_client`` spawns the process; this module decides how many and for how long. Over
stdio no bearer token tells principals apart, so each (server, principal) gets its own child: with
``keep="host"`` it is started on first use and ended when the host closes (a project window's code
analyser), with ``keep="call"`` one lives per connection. A principal's credential, if any, goes into
that child's ``token_env`` variable only.

The same evidence as on HTTP is kept: a journal sits between the session and the pipes and records,
per request, that it was written to the child and whether an answer with its id came back. A response
with an id the host never sent is dropped there and counted (over HTTP the wire guard rejects it),
and a ``notifications/cancelled`` the SDK sends for an abandoned request is recorded as sent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from mcp_types.version import LATEST_MODERN_VERSION

from adapter.host.connection import CLIENT_INFO, Connection, Principal, ServerSpec, failure_of, probe
from adapter.host.era import Era, Evidence, Learnt
from adapter.host.errors import ServerFailed
from adapter.host.tasks import advertises_tasks, task_extensions
from adapter.host.wire import CAPABILITIES_META, PROTOCOL_META, WireJournal, WireRecord, span_of

__all__ = ["StdioPool"]


@dataclass
class _Child:
    client: Client
    journal: WireJournal
    task: asyncio.Task[None]
    stop: asyncio.Event = field(default_factory=asyncio.Event)


class StdioPool:
    """The host's stdio children, one per (server, principal); ``aclose()`` ends them all."""

    def __init__(self) -> None:
        self._children: dict[tuple[str, Principal], _Child] = {}
        self.started = 0  # how many child processes were started (for tests and operations)

    @asynccontextmanager
    async def connection(
        self, spec: ServerSpec, principal: Principal, token: str, elicitation: Any, *, relearn: bool
    ) -> AsyncIterator[Connection]:
        assert spec.stdio is not None
        if spec.stdio.keep == "call":
            async with _open(spec, token, elicitation, relearn=relearn) as (client, journal):
                self.started += 1
                yield Connection(client, journal, spec, principal)
            return
        child = self._children.get((spec.id, principal))
        if child is None or child.task.done() or relearn:
            if child is not None:
                await self._end(child)
            child = await self._start(spec, token, elicitation, relearn=relearn)
            self._children[(spec.id, principal)] = child
        yield Connection(child.client, child.journal, spec, principal)

    async def _start(self, spec: ServerSpec, token: str, elicitation: Any, *, relearn: bool) -> _Child:
        ready: asyncio.Future[tuple[Client, WireJournal]] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()

        async def run() -> None:
            try:
                async with _open(spec, token, elicitation, relearn=relearn) as opened:
                    ready.set_result(opened)
                    await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        task = asyncio.create_task(run())
        try:
            client, journal = await ready
        except BaseException:
            with contextlib.suppress(BaseException):
                await task
            raise
        self.started += 1
        return _Child(client, journal, task, stop)

    async def _end(self, child: _Child) -> None:
        child.stop.set()
        with contextlib.suppress(BaseException):
            await child.task

    def alive(self) -> int:
        return sum(1 for child in self._children.values() if not child.task.done())

    async def end(self, server: str, principal: Principal) -> None:
        child = self._children.pop((server, principal), None)
        if child is not None:
            await self._end(child)

    async def aclose(self) -> None:
        children, self._children = list(self._children.values()), {}
        for child in children:
            await self._end(child)


def _params(spec: ServerSpec, token: str) -> StdioServerParameters:
    assert spec.stdio is not None
    env = dict(spec.stdio.env)
    if spec.stdio.token_env:
        env[spec.stdio.token_env] = token
    return StdioServerParameters(
        command=spec.stdio.command, args=list(spec.stdio.args), env=env, cwd=spec.stdio.cwd
    )


@asynccontextmanager
async def _open(
    spec: ServerSpec, token: str, elicitation: Any, *, relearn: bool
) -> AsyncIterator[tuple[Client, WireJournal]]:
    """One child and its client, in the learnt era (learning it first when needed)."""
    learnt = spec.learnt
    era: Era | None = None if (relearn or learnt is None or not learnt.fresh) else learnt.era
    failure: ServerFailed | None = None
    if era is None and spec.require_era != "legacy":
        journal = WireJournal(expected_server=spec.server_name)
        async with _client(spec, token, journal, "modern", None, elicitation) as client:
            evidence, result, exc = await probe(client, journal)
            if evidence is Evidence.MODERN and result is not None:
                found = Learnt.modern(result)
                failure = spec.check(found)
                if failure is None:
                    client.session.adopt(result)
                    spec.adopt(found)
                    journal.expected_server = spec.server_name
                    if not (spec.tasks and advertises_tasks(result)):
                        yield client, journal
                        return
                    learnt, era = found, "modern"  # a new child whose client declares the extension
            elif evidence is not Evidence.LEGACY:
                failure = failure_of(spec, evidence, exc)
        if era is None and failure is None and spec.require_era == "modern":
            failure = ServerFailed(
                "era", f"{spec.id}: speaks only the handshake era; the 2026 era is required"
            )
        if failure is not None:
            raise failure
        era = era or "legacy"  # the first request fixed that child's era: a new child for the handshake
    journal = WireJournal(expected_server=spec.server_name)
    modern = learnt if era == "modern" else None
    async with _client(spec, token, journal, era or "legacy", modern, elicitation) as client:
        if era != "modern" or modern is None:
            found = Learnt.legacy(client.protocol_version, client.server_info, client.instructions)
            failure = spec.check(found)
            if failure is None:
                spec.adopt(found)
                journal.expected_server = spec.server_name
                yield client, journal
        else:
            yield client, journal
    if failure is not None:
        raise failure


def _client(
    spec: ServerSpec, token: str, journal: WireJournal, era: Era, learnt: Learnt | None, elicitation: Any
) -> Client:
    mode = "legacy" if era == "legacy" else (learnt.version if learnt is not None else LATEST_MODERN_VERSION)
    discover = learnt.discover if learnt is not None and era == "modern" else None
    return Client(
        _journaled(_params(spec, token), journal),
        mode=mode,
        prior_discover=learnt.discover if learnt is not None else None,
        elicitation_callback=elicitation,
        cache=None,
        read_timeout_seconds=spec.timeout_seconds,
        client_info=CLIENT_INFO,
        extensions=task_extensions(spec.tasks, discover),
    )


@asynccontextmanager
async def _journaled(params: StdioServerParameters, journal: WireJournal) -> AsyncIterator[Any]:
    """The SDK's stdio transport with the journal between the session and the child's pipes."""
    async with stdio_client(params) as (read, write):
        to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        session_writes, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        pending: dict[str | int, WireRecord] = {}

        async def outbound() -> None:
            async with from_session:
                async for item in from_session:
                    _note_out(journal, pending, item)
                    await write.send(item)

        async def inbound() -> None:
            async with to_session:
                async for item in read:
                    if isinstance(item, SessionMessage) and not _note_in(journal, pending, item):
                        continue  # a response for a request this host never sent
                    await to_session.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(outbound)
            tg.start_soon(inbound)
            try:
                yield session_reads, session_writes
            finally:
                tg.cancel_scope.cancel()


def _note_out(journal: WireJournal, pending: dict[str | int, WireRecord], item: SessionMessage) -> None:
    message = item.message
    if isinstance(message, JSONRPCRequest):
        params = message.params or {}
        meta = params.get("_meta") or {}
        record = WireRecord(
            rpc_id=message.id,
            method=message.method,
            declared_version=meta.get(PROTOCOL_META),
            declared_capabilities=meta.get(CAPABILITIES_META),
            sent=True,
        )
        pending[message.id] = record
        journal.note(span_of(meta.get("traceparent")), record)
    elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
        request_id = (message.params or {}).get("requestId")
        if request_id is not None:
            journal.cancelled.append(request_id)


def _note_in(journal: WireJournal, pending: dict[str | int, WireRecord], item: SessionMessage) -> bool:
    message = item.message
    if not isinstance(message, JSONRPCResponse | JSONRPCError):
        return True  # a notification or a server request: the session handles it
    record = pending.pop(message.id, None) if message.id is not None else None
    if record is None:
        journal.strays += 1
        return False
    record.answered = True
    if isinstance(message, JSONRPCError):
        record.error_code = message.error.code
    return True
