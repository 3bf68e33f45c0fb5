"""The host: one object that holds servers, policy, registry, cache and audit, and makes calls.

Discovery, probing, the offer per principal, cached lists and reads live here; the call flow (consent,
sending, input rounds, settling the lifecycle from the evidence) lives in :mod:`adapter.host.calls`.
Nothing here resends an effectful call on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp_types import ElicitRequest, ListResourcesResult, ReadResourceResult, Tool
from tenacity import AsyncRetrying, RetryError, retry_if_exception, stop_after_attempt, wait_exponential

from adapter.host.audit import AuditEvent, AuditLog, TraceContext
from adapter.host.builder import all_tools, list_resources_page, read_resource_once, unreachable
from adapter.host.cache import ResultCache
from adapter.host.calls import CallRunner, Canceller, ProgressCallback
from adapter.host.connection import Connection, Principal, ServerSpec, connect, last_record
from adapter.host.consent import ConsentCallback, PreApprovals
from adapter.host.discovery import DiscoveryReport, ServerFailure, failure_from
from adapter.host.elicit import ElicitationHandler, answer
from adapter.host.era import classify
from adapter.host.errors import HostError, PolicyDenied, ServerFailed, unwrap
from adapter.host.lifecycle import Call
from adapter.host.policy import RETENTION_SECONDS, Policy, Risk
from adapter.host.registry import Diff, Entry, Registry
from adapter.host.stdio import StdioPool

if TYPE_CHECKING:
    from adapter.host.handle import CallHandle
    from adapter.host.watch import Watch

__all__ = ["Host", "ProbeSchedule", "ServerInstructions"]

log = logging.getLogger("adapter.host")


class ProbeSchedule:
    """Bounded background probes for a server that went down: ``attempts`` tries, backing off."""

    def __init__(self, attempts: int = 8, first_wait: float = 0.2, max_wait: float = 5.0) -> None:
        self.attempts, self.first_wait, self.max_wait = attempts, first_wait, max_wait


@dataclass(frozen=True)
class ServerInstructions:
    """A server's instructions as it declared them: untrusted text from across a trust boundary."""

    server: str
    text: str


def _passing(exc: BaseException) -> bool:
    return isinstance(exc, ServerFailed) and exc.kind == "unavailable"


class Host:
    """Talks to many MCP servers for many principals, keeping each (server, principal) apart."""

    def __init__(
        self,
        servers: list[ServerSpec],
        policy: Policy,
        *,
        consent: ConsentCallback,
        elicitation: ElicitationHandler | None = None,
        audit: AuditLog | None = None,
        probes: ProbeSchedule | None = None,
        cache: ResultCache | None = None,
        pre_approvals: PreApprovals | None = None,
        discovery_attempts: int = 3,
    ) -> None:
        _check_specs(servers)
        self.servers = {spec.id: spec for spec in servers}
        self.policy = policy
        self.registry = Registry()
        self.cache = cache or ResultCache()
        self.audit = audit or AuditLog()
        self.pre_approvals = pre_approvals or PreApprovals()
        self.stdio = StdioPool()
        self.failures: dict[tuple[str, Principal], ServerFailure] = {}
        self.discovery_attempts = discovery_attempts
        self._consent = consent
        self._elicitation = elicitation
        self._probes = probes or ProbeSchedule()
        self._probing: dict[tuple[str, Principal], asyncio.Task[None]] = {}
        self._calls = CallRunner(self, consent)
        self.watches: list[Watch] = []  # started by adapter.host.watch.watch(); stopped by aclose()

    async def __aenter__(self) -> Host:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        tasks = [*self._probing.values(), *(w.task for w in self.watches)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.stdio.aclose()

    def connect(
        self, server: str, principal: Principal, *, relearn: bool = False
    ) -> AbstractAsyncContextManager[Connection]:
        """A client for ``principal`` on ``server`` (policy checked); an async context manager."""
        self.policy.check_server(principal, server)
        legacy_callback = self._legacy_elicitation(server, principal) if self._elicitation else None
        spec = self.servers[server]
        return connect(spec, principal, legacy_callback, relearn=relearn, stdio=self.stdio, audit=self.audit)

    # --- discovery -------------------------------------------------------------------------

    async def discover(self, principal: Principal) -> DiscoveryReport:
        """Discover every server ``principal`` may use. A server that fails is reported, leaves the
        offer and is probed back; the others are discovered all the same."""
        report = DiscoveryReport()
        for server in self.servers:
            try:
                self.policy.check_server(principal, server)
            except PolicyDenied:
                continue
            try:
                report.diffs[server] = await self.discover_server(server, principal)
            except Exception as exc:
                report.failures[server] = self._failed(server, principal, unwrap(exc))
        return report

    async def discover_server(self, server: str, principal: Principal) -> Diff:
        """Discover one server afresh (its era learnt again); raises :class:`ServerFailed` or
        :class:`PolicyDenied` when it cannot be used (see :meth:`discover` for the forgiving form)."""
        self.policy.check_server(principal, server)
        spec = self.servers[server]
        tools: list[Tool] = []
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_passing),
            stop=stop_after_attempt(self.discovery_attempts),
            wait=wait_exponential(multiplier=0.05, max=1.0),
            reraise=True,
        ):
            with attempt:
                tools = await self._list(server, principal)
        diff = self.apply_tools(server, tools)
        self.failures.pop((server, principal), None)
        if spec.learnt is not None:
            log.info("discovered %s: %s era, %d tools", server, spec.learnt.era, len(tools))
        return diff

    async def _list(self, server: str, principal: Principal) -> list[Tool]:
        conn: Connection | None = None
        try:
            async with self.connect(server, principal, relearn=True) as conn:
                return await all_tools(conn)
        except Exception as caught:
            exc = unwrap(caught)
            if isinstance(exc, HostError):
                raise exc from caught
            if unreachable(exc):
                raise ServerFailed("unreachable", f"{server}: unreachable") from exc
            record = last_record(conn.journal, "tools/list") if conn is not None else None
            evidence = classify(exc, record)
            kind = "unauthorized" if evidence.value == "unauthorized" else "unavailable"
            raise ServerFailed(kind, f"{server}: {kind}: {type(exc).__name__}") from exc

    def apply_tools(self, server: str, tools: list[Tool]) -> Diff:
        """Apply a fresh tool list (diffed); a change drops caches and the changed tools' pre-approvals."""
        learnt = self.servers[server].learnt
        capabilities = None
        if learnt is not None and learnt.discover is not None:
            capabilities = learnt.discover.capabilities.model_dump(mode="json", exclude_none=True)
        diff = self.registry.apply(
            server, tools, auto_approve=self._auto_approve(server, tools), capabilities=capabilities
        )
        if not diff.empty:
            self.cache.invalidate(server)
            names = {k.name for k in (*diff.changed, *diff.removed)}
            self.pre_approvals.revoke_server(server, names, "the server's contract changed")
        return diff

    def _auto_approve(self, server: str, tools: list[Tool]) -> set[str]:
        """Which new tools are approved without asking: on first contact the allowlist; after that
        (a tool that appeared later) only those the allowlist names, or reads when it names none."""
        rule = self.policy.rule(server)
        known = server in self.registry.contracts
        if not known:
            return {t.name for t in tools} if rule.tools is None else set(rule.tools)
        if rule.tools is not None:
            return set(rule.tools)
        return {t.name for t in tools if self.policy.risk_of(server, t) is Risk.READ}

    def _failed(self, server: str, principal: Principal, exc: BaseException) -> ServerFailure:
        failure = failure_from(server, principal.key, exc)
        log.warning("discovery of %s for %s failed: %s", server, principal.key, failure.kind)
        if failure.server_at_fault:
            self.servers[server].forget()
            self.registry.mark_down(server)
        probing = failure.kind != "no_credentials"
        if probing:
            self._start_probe(server, principal)
        failure = ServerFailure(server, principal.key, failure.kind, failure.reason, probing)
        self.failures[(server, principal)] = failure
        return failure

    def went_down(self, server: str, principal: Principal) -> None:
        """A call found the server unreachable: out of the offer, probed back."""
        self._failed(server, principal, ServerFailed("unreachable", f"{server}: unreachable"))

    def _start_probe(self, server: str, principal: Principal) -> None:
        task = self._probing.get((server, principal))
        if task is None or task.done():
            self._probing[(server, principal)] = asyncio.create_task(self._probe(server, principal))

    def probe_task(self, server: str) -> asyncio.Task[None] | None:
        """The latest background probe of a server that went down (done once it came back or gave up)."""
        tasks = [task for (name, _), task in self._probing.items() if name == server]
        return tasks[-1] if tasks else None

    async def _probe(self, server: str, principal: Principal) -> None:
        schedule = self._probes
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(schedule.attempts),
                wait=wait_exponential(multiplier=schedule.first_wait, max=schedule.max_wait),
            ):
                with attempt:
                    await asyncio.sleep(0)
                    await self.discover_server(server, principal)
        except RetryError:
            log.warning("server %s stayed unavailable after %d probes", server, schedule.attempts)

    def active(self, principal: Principal) -> list[Entry]:
        """What ``principal`` may be offered now: approved, reachable, with credentials, and allowed
        by the current policy."""
        allowed = []
        for entry in self.registry.active():
            server = entry.key.server
            if not self.servers[server].has_credentials(principal) or (server, principal) in self.failures:
                continue
            try:
                self.policy.check_tool(principal, server, entry.key.name)
            except PolicyDenied:
                continue
            allowed.append(entry)
        return allowed

    def instructions(self, principal: Principal) -> list[ServerInstructions]:
        """Each usable server's instructions, to be put before a model as untrusted context."""
        found = []
        for server, spec in self.servers.items():
            if spec.learnt is None or not spec.learnt.instructions or server in self.registry.down:
                continue
            try:
                self.policy.check_server(principal, server)
            except PolicyDenied:
                continue
            if spec.has_credentials(principal) and (server, principal) not in self.failures:
                found.append(ServerInstructions(server, spec.learnt.instructions))
        return found

    # --- calls ------------------------------------------------------------------------------

    async def call(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        trace: TraceContext | None = None,
        on_progress: ProgressCallback | None = None,
        deadline_seconds: float | None = None,
    ) -> Call:
        """Call the active tool ``name`` (qualified or alias) and return the settled :class:`Call`.

        Raises :class:`UnknownCapability` or :class:`PolicyDenied` before anything is sent (also when
        the re-read contract of an effect differs from the approved one); every outcome after that
        (including a refused consent) is a state of the returned call.
        """
        prepared = self._calls.prepare(principal, name, arguments, trace)
        return await self._calls.execute(prepared, on_progress, deadline_seconds)

    def start(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        trace: TraceContext | None = None,
        on_progress: ProgressCallback | None = None,
        deadline_seconds: float | None = None,
    ) -> CallHandle:
        """Start a call in the background and return its :class:`CallHandle` (state, cancel, wait)."""
        from adapter.host.handle import CallHandle

        prepared = self._calls.prepare(principal, name, arguments, trace)
        return CallHandle.start(self._calls, prepared, on_progress, deadline_seconds)

    async def resolve(self, principal: Principal, call: Call) -> Call:
        """Run the call's status action once and move the call by the server's verdict."""
        return await self._calls.follower.resolve(principal, call)

    async def follow(
        self, principal: Principal, call: Call, *, deadline_seconds: float | None = None
    ) -> Call:
        """Follow a ``running`` call (or an unknown outcome) to its outcome (:mod:`adapter.host.follow`):
        the status tool, long-polled, or ``tasks/get``; until it settles or ``deadline_seconds`` pass.
        ``CallHandle.follow`` is the same for a started call, with ``cancel()`` to stop it."""
        return await self._calls.follower.follow(principal, call, Canceller(), deadline_seconds)

    # --- lists and reads (cached) ------------------------------------------------------------

    async def list_resources(
        self, principal: Principal, server: str, cursor: str | None = None
    ) -> ListResourcesResult:
        """One page (each page is cached on its own; no cross-page snapshot is implied)."""
        result = await self._cached(principal, server, "resources/list", cursor or "", list_resources_page)
        assert isinstance(result, ListResourcesResult)
        return result

    async def read_resource(self, principal: Principal, server: str, uri: str) -> ReadResourceResult:
        result = await self._cached(principal, server, "resources/read", uri, read_resource_once)
        assert isinstance(result, ReadResourceResult)
        return result

    async def _cached(
        self,
        principal: Principal,
        server: str,
        method: str,
        target: str,
        fetch: Callable[[Connection, str], Awaitable[Any]],
    ) -> Any:
        """Policy and credentials first, every time (a fresh entry, even a ``public`` one, is no
        permission); then the cache; then the source."""
        rule = self.policy.check_server(principal, server)
        self.servers[server].require_credentials(principal)
        hit = self.cache.get(server, method, target, principal.id, principal.tenant)
        if hit is not None:
            return hit
        async with self.connect(server, principal) as conn:
            result = await fetch(conn, target)
        scope = result.cache_scope or "private"
        key = self.cache.key(server, method, target, principal.id, principal.tenant, scope)
        retention = RETENTION_SECONDS[rule.retention]
        self.cache.put(key, result, result.ttl_ms, retention_seconds=retention, retention=rule.retention)
        return result

    # --- helpers ----------------------------------------------------------------------------

    def _legacy_elicitation(self, server: str, principal: Principal) -> Any:
        """The SDK callback for handshake-era servers, which ask over their session."""
        rule = self.policy.rule(server)

        async def callback(ctx: Any, params: Any) -> Any:
            request = ElicitRequest(params=params)
            return await answer(
                self._elicitation,
                server=server,
                principal=principal.id,
                tool="?",
                call_id="legacy",
                key=str(getattr(ctx, "request_id", "")),
                request=request,
                url_domains=rule.url_domains,
            )

        return callback

    def audit_unsent(
        self, principal: Principal, entry: Entry, exc: Exception, call: Call | None = None
    ) -> None:
        """A call the host refused or could not start: ``denied`` by policy (or missing credentials,
        or a contract that changed since approval), else ``error``; the detail names the reason,
        never arguments or tokens."""
        denied = isinstance(exc, HostError) and not isinstance(exc, ServerFailed)
        self.audit.record(
            AuditEvent(
                AuditLog.now(),
                entry.key.server,
                principal.id,
                entry.qualified,
                entry.fingerprint,
                "denied" if denied else "error",
                call.call_id if call else "",
                call.trace_id if call else "",
                str(exc) if denied else f"not sent: {type(exc).__name__}",
                principal.tenant,
            )
        )

    def audit_call(self, call: Call, detail: str = "") -> None:
        self.audit.record(
            AuditEvent(
                AuditLog.now(),
                call.server,
                call.principal,
                call.qualified,
                call.fingerprint,
                call.state.value,
                call.call_id,
                call.trace_id,
                detail or (call.history[-1][2] if call.history else ""),
                call.tenant,
            )
        )


def _check_specs(servers: list[ServerSpec]) -> None:
    """One id per server, one server per endpoint, and every transport choice written down."""
    ids = [spec.id for spec in servers]
    if len(set(ids)) != len(ids):
        raise ValueError(f"server ids must be unique: {ids}")
    endpoints = [spec.endpoint for spec in servers]
    if len(set(endpoints)) != len(endpoints):
        raise ValueError("two server ids name the same endpoint: its identity would be split")
    for spec in servers:
        if spec.transport is None:
            raise ValueError(f"server {spec.id!r}: record its TransportDecision (operator, update path, ...)")
