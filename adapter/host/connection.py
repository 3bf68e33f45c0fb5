"""One client per (server, principal) request, on the SDK's ``Client`` over Streamable HTTP.

The request builder lives here. Every connection declares the protocol version chosen for that server
(learnt once by ``server/discover``, then pinned; a server of the handshake era is talked to through the
SDK's legacy mode, an explicit compatibility path) and only the client capabilities the host implements:
elicitation only when the application gave an elicitation handler. The SDK stamps both into each
request's ``_meta``; the wire guard checks each response against them, the server identity and the
request id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import DiscoverResult, Implementation

from adapter.host.errors import PolicyDenied
from adapter.host.wire import WireGuard, WireJournal

__all__ = ["Connection", "Principal", "ServerSpec", "connect"]

TransportWrapper = Callable[[httpx2.AsyncBaseTransport], httpx2.AsyncBaseTransport]


@dataclass(frozen=True)
class Principal:
    """The signed-in user the host acts for."""

    id: str
    tenant: str


@dataclass
class ServerSpec:
    """One server the host may talk to. ``id`` is the host's stable identity for it (no dots).

    ``credentials`` maps a principal id to that principal's bearer token for this server; tokens go
    into the Authorization header and nowhere else. ``server_name`` pins the ``serverInfo`` name its
    responses must carry (None: pinned by the first discovery). ``wrap_transport`` lets a test or a
    proxy sit between the wire guard and the network.
    """

    id: str
    url: str
    credentials: Mapping[str, str]
    server_name: str | None = None
    timeout_seconds: float = 30.0
    wrap_transport: TransportWrapper | None = None
    era: str | None = field(default=None, init=False)  # "modern" or "legacy", from the first discovery
    version: str | None = field(default=None, init=False)
    discover: DiscoverResult | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not self.id or "." in self.id:
            raise ValueError(f"server id {self.id!r} must be non-empty and contain no '.'")


@dataclass
class Connection:
    client: Client
    journal: WireJournal
    spec: ServerSpec
    principal: Principal

    @property
    def legacy(self) -> bool:
        return self.spec.era == "legacy"


@asynccontextmanager
async def connect(
    spec: ServerSpec, principal: Principal, elicitation: Any | None
) -> AsyncIterator[Connection]:
    """A connected client for one principal on one server; raises when the server cannot be reached,
    and :class:`PolicyDenied` when the host holds no credentials for that principal there.

    ``elicitation`` is the SDK callback used only on handshake-era servers (which ask back over the
    session); on 2026 servers the host drives input rounds itself. Passing it is what declares the
    elicitation capability, so it is passed only when the application can render a question.
    """
    token = spec.credentials.get(principal.id)
    if token is None:
        raise PolicyDenied(f"no credentials for {principal.id!r} on {spec.id!r}")
    journal = WireJournal(expected_server=spec.server_name)
    transport: httpx2.AsyncBaseTransport = httpx2.AsyncHTTPTransport()
    if spec.wrap_transport is not None:
        transport = spec.wrap_transport(transport)
    async with httpx2.AsyncClient(
        transport=WireGuard(transport, journal),
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(spec.timeout_seconds),
    ) as http:
        mode: Any = "auto"
        if spec.era == "modern" and spec.version:
            mode = spec.version
        elif spec.era == "legacy":
            mode = "legacy"
        client = Client(
            streamable_http_client(spec.url, http_client=http),
            mode=mode,
            prior_discover=spec.discover if spec.era == "modern" else None,
            elicitation_callback=elicitation,
            cache=None,  # the host's own cache: keyed by principal and re-checked against policy
            read_timeout_seconds=spec.timeout_seconds,
            client_info=Implementation(name="adapter-host-kit", version="0.1.0"),
        )
        async with client:
            _learn(spec, client, journal)
            yield Connection(client, journal, spec, principal)


def _learn(spec: ServerSpec, client: Client, journal: WireJournal) -> None:
    """Pin era, version and identity on first contact; later contacts are checked against them."""
    if spec.era is None:
        discovered = client.session.discover_result
        spec.era = "modern" if discovered is not None else "legacy"
        spec.version = client.protocol_version
        spec.discover = discovered
    name = client.server_info.name if client.server_info is not None else None
    if spec.server_name is None and name:
        spec.server_name = name
    journal.expected_server = spec.server_name
