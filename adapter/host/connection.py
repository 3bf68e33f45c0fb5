"""One client per (server, principal) request, on the SDK's ``Client`` over Streamable HTTP or stdio.

The request builder lives here. Every connection declares the protocol version learnt for that server
(:mod:`adapter.host.era`: learnt explicitly, fresh for the discover result's ``ttlMs``, learnt again
after that; a server of the handshake era is talked to through the SDK's legacy mode, an explicit
compatibility path) and only the client capabilities the host implements: elicitation only when the
application gave an elicitation handler. The SDK stamps both into each request's ``_meta``; the wire
guard checks each response against them, the server identity, the configured URL and the request id.

A server's identity is its configured id and URL (or command, for stdio); the name it declares and
the contract fingerprint it shows are checks on that identity, never the identity itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import DiscoverResult, Implementation
from mcp_types.version import LATEST_MODERN_VERSION

from adapter.host.audit import AuditLog
from adapter.host.era import Era, Evidence, Learnt, classify, discover_evidence
from adapter.host.errors import PolicyDenied, ServerFailed
from adapter.host.oauth import OAuth
from adapter.host.tasks import TASKS, advertises_tasks, task_extensions
from adapter.host.wire import WireGuard, WireJournal, WireRecord

if TYPE_CHECKING:
    from adapter.host.stdio import StdioPool

__all__ = [
    "Connection",
    "Principal",
    "ServerSpec",
    "StdioServer",
    "TransportDecision",
    "connect",
]

TransportWrapper = Callable[[httpx2.AsyncBaseTransport], httpx2.AsyncBaseTransport]
CLIENT_INFO = Implementation(name="adapter-host-kit", version="0.2.0")


@dataclass(frozen=True)
class Principal:
    """The signed-in user the host acts for: a user id within a tenant (``alice@acme``)."""

    id: str
    tenant: str

    @property
    def key(self) -> str:
        return f"{self.id}@{self.tenant}"


@dataclass(frozen=True)
class TransportDecision:
    """Why a server is reached the way it is: the seed asks for this beside every transport choice.

    ``operator`` runs it, ``update_path`` is how it changes, ``principal`` is whom it acts for,
    ``network_path`` is what lies between host and server, ``lifecycle`` is how long it lives.
    """

    operator: str
    update_path: str
    principal: str
    network_path: str
    lifecycle: str

    def __post_init__(self) -> None:
        for name in ("operator", "update_path", "principal", "network_path", "lifecycle"):
            if not getattr(self, name).strip():
                raise ValueError(f"TransportDecision.{name} must say something")


@dataclass(frozen=True)
class StdioServer:
    """A local child process the host starts; stdout carries MCP messages only.

    Over stdio there is no bearer token, so principals are kept apart by process: each principal gets
    a child of its own (``keep="host"``: started on first use, ended with the host; ``keep="call"``:
    one per connection). A principal's credential, when the server needs one, goes into the
    environment variable ``token_env`` of that principal's child and nowhere else.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    token_env: str | None = None
    keep: Literal["host", "call"] = "host"


@dataclass
class ServerSpec:
    """One server the host may talk to. ``id`` is the host's stable identity for it (no dots).

    ``url`` (Streamable HTTP) or ``stdio`` (a child process) says how it is reached; ``transport``
    records why (required). ``credentials`` maps a :class:`Principal` (id and tenant) to that
    principal's bearer token for this server; tokens go into the Authorization header (or the stdio
    child's ``token_env``) and nowhere else. ``server_name`` is the ``serverInfo`` name its responses
    must carry (None: pinned by the first discovery). ``require_era`` refuses a server of the other
    era instead of falling back. ``wrap_transport`` lets a test or a proxy sit between the wire guard
    and the network. ``tasks``: declare the Tasks extension (``io.modelcontextprotocol/tasks``) on
    requests to this server when its discover advertises it, so a long call may answer with a task
    that the host follows with ``tasks/get`` (:mod:`adapter.host.tasks`). Off by default: a task
    answers at once, so even a short commit then takes a ``tasks/get`` round (the server's
    ``pollIntervalMs``) to settle, where without it the server waits a few seconds and answers the
    result, or ``in_progress`` for a long one, which the host follows all the same. ``oauth``: get
    each principal's token from an OAuth provider instead of ``credentials`` (:mod:`adapter.host.oauth`:
    discovery from the server's 401, client credentials for a service, authorization code with PKCE
    for a person, refresh, step-up on 403 ``insufficient_scope``); HTTP only, and not beside
    ``credentials``.
    """

    id: str
    url: str | None = None
    credentials: Mapping[Principal, str] = field(default_factory=dict)
    server_name: str | None = None
    timeout_seconds: float = 30.0
    wrap_transport: TransportWrapper | None = None
    transport: TransportDecision | None = None
    stdio: StdioServer | None = None
    require_era: Era | None = None
    learnt: Learnt | None = field(default=None, init=False)
    tasks: bool = field(default=False, kw_only=True)
    oauth: OAuth | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if not self.id or "." in self.id:
            raise ValueError(f"server id {self.id!r} must be non-empty and contain no '.'")
        if (self.url is None) == (self.stdio is None):
            raise ValueError(f"server {self.id!r}: give exactly one of url= and stdio=")
        for key in [*self.credentials, *(self.oauth.services if self.oauth is not None else ())]:
            if not isinstance(key, Principal):
                raise TypeError(f"server {self.id!r}: credentials are keyed by Principal, not {key!r}")
        if self.oauth is not None and (self.stdio is not None or self.credentials):
            raise ValueError(f"server {self.id!r}: oauth= is for HTTP servers, instead of credentials=")

    @property
    def era(self) -> Era | None:
        return self.learnt.era if self.learnt is not None else None

    @property
    def version(self) -> str | None:
        return self.learnt.version if self.learnt is not None else None

    @property
    def endpoint(self) -> str:
        """The configured identity of the server: its URL, or its command line."""
        if self.url is not None:
            return self.url
        assert self.stdio is not None
        return " ".join(["stdio:", self.stdio.command, *self.stdio.args])

    def has_credentials(self, principal: Principal) -> bool:
        """Whether the host holds (or, with OAuth, can obtain) a credential for ``principal`` here."""
        if self.oauth is not None:
            return self.oauth.serves(principal)
        return principal in self.credentials

    def require_credentials(self, principal: Principal) -> None:
        """Raises :class:`PolicyDenied` unless :meth:`has_credentials`."""
        if not self.has_credentials(principal):
            raise PolicyDenied(f"no credentials for {principal.key!r} on {self.id!r}")

    def token_for(self, principal: Principal) -> str:
        """The principal's static credential here, matched by id *and* tenant; raises
        :class:`PolicyDenied` (an OAuth server has none: its tokens come per connection)."""
        token = self.credentials.get(principal)
        if token is None:
            raise PolicyDenied(f"no credentials for {principal.key!r} on {self.id!r}")
        return token

    def forget(self) -> None:
        """Learn the era again on the next connection (the server changed, went down, or said so)."""
        self.learnt = None

    def check(self, learnt: Learnt) -> ServerFailed | None:
        """Why what a detection learnt cannot be this server (identity, required era), or None."""
        name = learnt.server_info.name if learnt.server_info is not None else None
        if self.server_name is not None and name is not None and name != self.server_name:
            why = f"{self.id}: server declares {name!r}, expected {self.server_name!r}"
            return ServerFailed("identity", why)
        if self.require_era is not None and learnt.era != self.require_era:
            return ServerFailed("era", f"{self.id}: speaks the {learnt.era} era, {self.require_era} required")
        return None

    def adopt(self, learnt: Learnt) -> None:
        """Keep what a detection learnt (checked first by :meth:`check`); pins the declared name."""
        name = learnt.server_info.name if learnt.server_info is not None else None
        if self.server_name is None and name:
            self.server_name = name
        self.learnt = learnt


@dataclass
class Connection:
    client: Client
    journal: WireJournal
    spec: ServerSpec
    principal: Principal

    @property
    def legacy(self) -> bool:
        return self.spec.era == "legacy"

    @property
    def declares_tasks(self) -> bool:
        """Whether this connection's requests declare the Tasks extension."""
        return any(extension.identifier == TASKS for extension in self.client.extensions or ())


@asynccontextmanager
async def connect(
    spec: ServerSpec,
    principal: Principal,
    elicitation: Any | None,
    *,
    relearn: bool = False,
    stdio: StdioPool | None = None,
    audit: AuditLog | None = None,
) -> AsyncIterator[Connection]:
    """A connected client for one principal on one server.

    Raises :class:`PolicyDenied` when the host holds no credentials for that principal there, and
    :class:`ServerFailed` when the era could not be learnt (unreachable, unauthorized, unavailable,
    another era than required, another identity). ``elicitation`` is the SDK callback used only on
    handshake-era servers (which ask back over the session); passing it is what declares the
    elicitation capability, so it is passed only when the application can render a question. With
    ``spec.oauth`` the token comes from the provider (``audit`` gets its token events).
    """
    spec.require_credentials(principal)
    if spec.stdio is not None:
        assert stdio is not None, "stdio servers are reached through the host's StdioPool"
        token = spec.token_for(principal)
        async with stdio.connection(spec, principal, token, elicitation, relearn=relearn) as conn:
            yield conn
        return
    assert spec.url is not None
    journal = WireJournal(expected_server=spec.server_name, expected_url=spec.url)
    transport: httpx2.AsyncBaseTransport = httpx2.AsyncHTTPTransport()
    if spec.wrap_transport is not None:
        transport = spec.wrap_transport(transport)
    auth: httpx2.Auth | None = None
    headers: dict[str, str] = {}
    if spec.oauth is not None:
        auth = spec.oauth.auth(spec.id, spec.url, principal, audit, spec.timeout_seconds)
    else:
        headers["Authorization"] = f"Bearer {spec.token_for(principal)}"
    async with httpx2.AsyncClient(
        transport=WireGuard(transport, journal),
        headers=headers,
        auth=auth,
        timeout=httpx2.Timeout(spec.timeout_seconds),
    ) as http:
        learnt = spec.learnt
        if relearn or learnt is None or not learnt.fresh:
            async with _detect(spec, http, journal, elicitation) as client:
                yield Connection(client, journal, spec, principal)
            return
        async with _client(spec, http, learnt.era, learnt, elicitation) as client:
            _check_handshake(spec, client, journal)
            yield Connection(client, journal, spec, principal)


def _client(
    spec: ServerSpec, http: httpx2.AsyncClient, era: Era, learnt: Learnt | None, elicitation: Any | None
) -> Client:
    assert spec.url is not None
    mode = learnt.version if era == "modern" and learnt is not None else "legacy"
    if era == "modern" and learnt is None:
        mode = LATEST_MODERN_VERSION
    discover = learnt.discover if learnt is not None and era == "modern" else None
    return Client(
        streamable_http_client(spec.url, http_client=http),
        mode=mode,
        prior_discover=learnt.discover if learnt is not None else None,
        elicitation_callback=elicitation,
        cache=None,  # the host's own cache: keyed by principal and re-checked against policy
        read_timeout_seconds=spec.timeout_seconds,
        client_info=CLIENT_INFO,
        extensions=task_extensions(spec.tasks, discover),
    )


def last_record(journal: WireJournal, method: str) -> WireRecord | None:
    """The latest record of ``method`` (or of a redirect of it the guard refused after it)."""
    for record in reversed(journal.recent):
        if record.method in (method, "(redirected)"):
            return record
    return None


def failure_of(spec: ServerSpec, evidence: Evidence, exc: BaseException | None) -> ServerFailed:
    kind = {
        Evidence.UNAUTHORIZED: "unauthorized",
        Evidence.UNREACHABLE: "unreachable",
        Evidence.INCOMPATIBLE: "era",
        Evidence.MISROUTED: "identity",
    }.get(evidence, "unavailable")
    why = f": {type(exc).__name__}" if exc is not None else ""
    return ServerFailed(kind, f"{spec.id}: {kind}{why}")


@asynccontextmanager
async def _detect(
    spec: ServerSpec, http: httpx2.AsyncClient, journal: WireJournal, elicitation: Any | None
) -> AsyncIterator[Client]:
    """Learn the era on this connection and keep the client that learnt it (see adapter.host.era).

    Failures are raised outside the SDK's client context (inside it, its task group wraps them)."""
    failure: ServerFailed | None = None
    declaring: Learnt | None = None  # learnt modern, with the Tasks extension to declare
    if spec.require_era != "legacy":
        async with _client(spec, http, "modern", None, elicitation) as client:
            evidence, result, exc = await probe(client, journal)
            if evidence is Evidence.MODERN and result is not None:
                learnt = Learnt.modern(result)
                failure = spec.check(learnt)
                if failure is None:
                    client.session.adopt(result)
                    spec.adopt(learnt)
                    journal.expected_server = spec.server_name
                    if not (spec.tasks and advertises_tasks(result)):
                        yield client
                        return
                    declaring = learnt
            elif evidence is not Evidence.LEGACY:
                failure = failure_of(spec, evidence, exc)
    if declaring is not None:
        # The probe declared no extension (the server's offer was not known yet); a client built
        # from what it learnt declares the Tasks extension, with no request of its own.
        async with _client(spec, http, "modern", declaring, elicitation) as client:
            yield client
        return
    if failure is None and spec.require_era == "modern":
        failure = ServerFailed("era", f"{spec.id}: speaks only the handshake era; the 2026 era is required")
    if failure is not None:
        raise failure
    try:
        entered = _client(spec, http, "legacy", None, elicitation)
        client = await entered.__aenter__()
    except Exception as exc:
        raise failure_of(spec, classify(exc, last_record(journal, "initialize")), exc) from exc
    learnt = Learnt.legacy(client.protocol_version, client.server_info, client.instructions)
    failure = spec.check(learnt)
    if failure is not None:
        await entered.__aexit__(None, None, None)
        raise failure
    spec.adopt(learnt)
    journal.expected_server = spec.server_name
    try:
        yield client
    except BaseException as exc:
        await entered.__aexit__(type(exc), exc, exc.__traceback__)
        raise
    else:
        await entered.__aexit__(None, None, None)


async def probe(
    client: Client, journal: WireJournal
) -> tuple[Evidence, DiscoverResult | None, BaseException | None]:
    """One ``server/discover`` and what it is evidence of."""
    try:
        raw = await client.session.send_discover(LATEST_MODERN_VERSION)
    except Exception as exc:
        return classify(exc, last_record(journal, "server/discover")), None, exc
    evidence, result = discover_evidence(raw)
    return evidence, result, None


def _check_handshake(spec: ServerSpec, client: Client, journal: WireJournal) -> None:
    """A handshake-era connection re-declares its identity on every connection: check it."""
    if spec.era != "legacy":
        return
    name = client.server_info.name if client.server_info is not None else None
    if spec.server_name is not None and name is not None and name != spec.server_name:
        raise ServerFailed("identity", f"{spec.id}: server declares {name!r}, expected {spec.server_name!r}")
    journal.expected_server = spec.server_name
