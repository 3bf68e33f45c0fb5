"""The host kit against a server that asks for OAuth: this kit's server in resource-server mode and the
project's real OpenID provider (oidc-provider, ``tests/support/idp.py``; ``make node-clients``).

The host starts with no token. It learns the provider from the server's 401, gets a token per
(server, principal) through the SDK's providers (client credentials for a service principal; the
authorization code with PKCE for a person, signed in headless by the application's callback), steps
up on each 403 ``insufficient_scope``, obtains a new token after expiry or refreshes it (keeping a
rotated refresh token), keeps two principals' tokens apart, and writes no token, secret or code
into a log or an audit event.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread
import httpx
import httpx2
import pytest
from mcp.shared.auth import AuthorizationCodeResult, OAuthToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from adapter.bootstrap import Kit
from adapter.entrypoints.http.app import create_app
from adapter.host import (
    AuthorizationCode,
    Call,
    CallState,
    ClientCredentials,
    Host,
    MemoryTokenStore,
    OAuth,
    Policy,
    PolicyDenied,
    Principal,
    ServerRule,
    ServerSpec,
    SignIn,
    StdioServer,
    TokenKey,
    contract_of,
)
from adapter.services.admin.reads import ImportFilter
from tests.host.conftest import HTTP_DECISION
from tests.host.test_docs import examples
from tests.support.idp import (
    BROWSER_REDIRECT,
    COMMIT,
    INSTALLED,
    READ,
    SECRET,
    WRITE,
    Provider,
    claims_of,
    running_provider,
    sign_in,
)
from tests.support.servers import free_port, serve_in_process

pytestmark = pytest.mark.anyio

AGENT, OTHER = Principal("agent", "acme"), Principal("other-agent", "acme")
ALICE = Principal("alice", "acme")


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    if not INSTALLED:
        pytest.skip("oidc-provider not installed: run `make node-clients` (npm ci in tests/node)")
    with running_provider(tmp_path_factory.mktemp("idp")) as provider:
        yield provider


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'adapter.db'}"  # about tokens and HTTP: SQLite is enough


@pytest.fixture
def mcp_port() -> int:
    return free_port()


@pytest.fixture
def kit_defaults(idp: Provider, mcp_port: int) -> dict[str, Any]:
    audience = f"http://127.0.0.1:{mcp_port}/mcp"
    return {"tokens": None, "oauth_issuer": idp.issuer, "oauth_audience": audience}


@pytest.fixture
async def server(kit: Kit, mcp_port: int) -> AsyncIterator[str]:
    """This kit's server in resource-server mode; its MCP URL."""
    async with serve_in_process(create_app(kit), port=mcp_port) as base_url:
        yield base_url + "/mcp"


class Wire:
    """Below the wire guard: each MCP request's method, HTTP status, bearer token and trace id."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, str | None, str]] = []

    def wrap(self, inner: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        return _Recording(inner, self)

    def statuses(self, status: int) -> list[str]:
        return [method for method, code, _, _ in self.seen if code == status]


class _Recording(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, wire: Wire) -> None:
        self.inner, self.wire = inner, wire

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        try:
            body = json.loads(request.content)
        except ValueError:
            body = {}
        name = (body.get("params") or {}).get("name")
        method = f"{body.get('method')}:{name}" if name else str(body.get("method"))
        header = request.headers.get("authorization")
        bearer = header[7:] if header else None
        traceparent = str(((body.get("params") or {}).get("_meta") or {}).get("traceparent", ""))
        trace = traceparent.split("-")[1] if traceparent.count("-") == 3 else ""
        self.wire.seen.append((method, response.status_code, bearer, trace))
        return response


class RecordingStore(MemoryTokenStore):
    """The default store, also keeping every token set it was given (to look for them elsewhere)."""

    def __init__(self) -> None:
        super().__init__()
        self.history: list[tuple[TokenKey, OAuthToken]] = []

    async def set_tokens(self, key: TokenKey, tokens: OAuthToken) -> None:
        self.history.append((key, tokens))
        await super().set_tokens(key, tokens)

    def secrets(self) -> set[str]:
        return {s for _, t in self.history for s in (t.access_token, t.refresh_token) if s}


async def allow(request: Any) -> bool:
    return True


def services(*clients: str) -> dict[Principal, ClientCredentials]:
    return {Principal(c, "acme"): ClientCredentials(c, SECRET) for c in clients}


def host_for(url: str, oauth: OAuth, wire: Wire | None = None, principals: set[str] | None = None) -> Host:
    spec = ServerSpec(
        "eu",
        url,
        transport=HTTP_DECISION,
        oauth=oauth,
        wrap_transport=wire.wrap if wire is not None else None,
    )
    rule = ServerRule(principals=principals or {"agent", "other-agent", "alice"})
    return Host([spec], Policy({"eu": rule}), consent=allow)


async def run_import(host: Host, principal: Principal, records: int = 3) -> list[Call]:
    begun = await host.call(principal, "eu.begin_import", {"target": "customers"})
    assert begun.state is CallState.COMPLETED, begun.history
    handle = begun.result["handle"]
    rows = [{"id": i, "name": f"c{i}"} for i in range(records)]
    added = await host.call(principal, "eu.add_records", {"handle": handle, "records": rows})
    committed = await host.call(principal, "eu.commit_import", {"handle": handle})
    return [begun, added, committed]


def token_events(host: Host) -> list[tuple[str, str, str]]:
    return [(e.principal, e.outcome, e.detail) for e in host.audit.events if e.tool == "(oauth)"]


def stored(kit: Kit) -> list[tuple[str, str]]:
    return [(i.principal, i.tenant) for i in kit.admin.list_imports(ImportFilter()).items]


# --- client credentials -------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["modern", "legacy"])  # 2026-07-28, and a 2025-11-25 session
async def test_a_service_principal_gets_a_token_by_client_credentials_and_steps_up_to_commit(
    server: str, idp: Provider, kit: Kit, legacy_engine: Any, era: Literal["modern", "legacy"]
) -> None:
    wire, store = Wire(), RecordingStore()
    oauth = OAuth(idp.issuer, services=services("agent"), store=store)
    async with host_for(server, oauth, wire) as host:
        host.servers["eu"].require_era = era
        report = await host.discover(AGENT)
        assert report.ok, report.failures
        calls = await run_import(host, AGENT)
    assert host.servers["eu"].era == era
    assert [c.state for c in calls] == [CallState.COMPLETED] * 3, [c.history for c in calls]
    assert calls[2].result["status"] == "committed"
    assert len(legacy_engine.committed_batches()) == 1
    # one 401 (the first request, no token), one 403 per missing scope, each seen once on the wire
    assert wire.statuses(401) == ["server/discover" if era == "modern" else "initialize"]
    assert wire.statuses(403) == ["tools/call:begin_import", "tools/call:commit_import"]
    granted = token_events(host)
    assert [(p, o) for p, o, _ in granted] == [("agent", "token_granted")] * 3
    assert [set(d.split(": ")[1].split()) for _, _, d in granted] == [
        {READ},
        {READ, WRITE},
        {READ, WRITE, COMMIT},
    ]
    assert all(d.startswith("client_credentials: ") for _, _, d in granted)
    assert store.keys() == [TokenKey("eu", AGENT)]
    token = await store.get_tokens(TokenKey("eu", AGENT))
    assert token is not None and claims_of(token.access_token)["aud"] == server  # RFC 8707
    assert stored(kit) == [("agent", "acme")]
    binding = contract_of(host, "eu").principal_binding
    assert binding["credentials"] == f"OAuth token per principal from {idp.issuer}"


async def test_an_expired_service_token_is_replaced_by_a_new_grant_before_the_next_call(
    server: str, idp: Provider, legacy_engine: Any
) -> None:
    wire, store = Wire(), RecordingStore()
    short = Principal("short-lived", "acme")  # its tokens live 3 s
    oauth = OAuth(idp.issuer, services=services("short-lived"), store=store)
    async with host_for(server, oauth, wire, {"short-lived"}) as host:
        await host.discover(short)
        first = await host.call(short, "eu.begin_import", {"target": "customers"})
        before = await store.get_tokens(TokenKey("eu", short))
        # past the token's lifetime as the host counts it (from its receipt, before the first call:
        # expires_in is 3 s); the server's leeway still takes it, so the host must renew on its own
        await asyncio.sleep(3.5)
        status = await host.call(short, "eu.get_import_status", {"handle": first.result["handle"]})
        after = await store.get_tokens(TokenKey("eu", short))
    assert status.state is CallState.COMPLETED, status.history
    assert before is not None and after is not None and before.access_token != after.access_token
    assert claims_of(after.access_token)["exp"] > claims_of(before.access_token)["exp"]
    # client credentials have no refresh token: a new grant, with the scopes the server asks for now
    assert [o for _, o, _ in token_events(host)][-1] == "token_granted"
    assert token_events(host)[-1][2].startswith("client_credentials: ")
    assert wire.seen[-1][0] == "tools/call:get_import_status" and wire.seen[-1][2] == after.access_token


class Person:
    """The application's side of a person's sign-in: the headless browser of tests/support/idp.py."""

    def __init__(self, login: str) -> None:
        self.login = login
        self.asked: list[SignIn] = []
        self.codes: list[str] = []

    async def sign_in(self, request: SignIn) -> AuthorizationCodeResult:
        self.asked.append(request)
        redirected = await anyio.to_thread.run_sync(sign_in, request.url, self.login)
        self.codes.append(redirected["code"])
        return AuthorizationCodeResult(
            code=redirected["code"], state=redirected["state"], iss=redirected["iss"]
        )


def people(client: str, person: Person) -> AuthorizationCode:
    return AuthorizationCode(client, BROWSER_REDIRECT, person.sign_in)


async def test_a_persons_token_is_refreshed_after_expiry_and_the_rotated_refresh_token_is_kept(
    server: str, idp: Provider, kit: Kit
) -> None:
    alice, store = Person("alice"), RecordingStore()
    oauth = OAuth(idp.issuer, users=people("short-browser", alice), store=store)  # 2 s tokens
    key = TokenKey("eu", ALICE)
    async with host_for(server, oauth) as host:
        await host.discover(ALICE)
        first = await store.get_tokens(key)
        refresh_tokens = []
        for _ in range(2):
            await asyncio.sleep(2.5)  # the access token expired: refreshed before the next request
            listed = await host.call(ALICE, "eu.get_import_status", {"handle": "imp_unknown"})
            assert listed.state is CallState.FAILED and listed.error is not None  # the server's answer
            assert listed.error.startswith("handle_not_found"), listed.history  # to alice, signed in
            now = await store.get_tokens(key)
            assert now is not None and now.refresh_token is not None
            refresh_tokens.append(now.refresh_token)
    assert first is not None and first.refresh_token is not None  # offline_access, asked by the SDK
    assert len(alice.asked) == 1  # signed in once; every later token came by refresh
    refreshes = [d for _, o, d in token_events(host) if d.startswith("refresh_token")]
    assert len(refreshes) >= 2 and all(o == "token_granted" for _, o, d in token_events(host))
    # the provider rotates a public client's refresh token: each refresh used the latest one
    assert len({first.refresh_token, *refresh_tokens}) == 3
    reused = httpx.post(
        f"{idp.issuer}/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": first.refresh_token,
            "client_id": "short-browser",
        },
        timeout=10,
    )
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"  # spent


# --- concurrency ---------------------------------------------------------------------------------


class Gate:
    """Holds the first ``tools/call`` of ``tool`` below the wire guard until another request got its
    answer: a request the SDK's lock would make the second one wait for."""

    def __init__(self, tool: str) -> None:
        self.tool, self.held, self.released = tool, asyncio.Event(), asyncio.Event()
        self.order: list[str] = []

    def wrap(self, inner: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        return _Gated(inner, self)


class _Gated(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, gate: Gate) -> None:
        self.inner, self.gate = inner, gate

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content) if request.content else {}
        name = (body.get("params") or {}).get("name")
        gate = self.gate
        if body.get("method") == "tools/call" and name == gate.tool and not gate.held.is_set():
            gate.held.set()
            with anyio.fail_after(10):  # what the SDK's lock would make of it: the other never comes
                await gate.released.wait()
        response = await self.inner.handle_async_request(request)
        if body.get("method") == "tools/call":
            gate.order.append(str(name))
            if name != gate.tool:
                gate.released.set()
        return response


async def test_one_principals_requests_to_one_server_are_not_queued_behind_each_other(
    server: str, idp: Provider
) -> None:
    gate = Gate("get_import_status")
    oauth = OAuth(idp.issuer, services=services("agent"))
    spec = ServerSpec("eu", server, transport=HTTP_DECISION, oauth=oauth, wrap_transport=gate.wrap)
    async with Host([spec], Policy({"eu": ServerRule(principals={"agent"})}), consent=allow) as host:
        await host.discover(AGENT)  # the token: valid from here on
        held = asyncio.create_task(host.call(AGENT, "eu.get_import_status", {"handle": "imp_a"}))
        await asyncio.wait_for(gate.held.wait(), 10)
        other = await host.call(AGENT, "eu.get_operation_status", {"operation_id": "op_b"})
        first = await held
    assert gate.order == ["get_operation_status", "get_import_status"]  # the second did not wait
    assert first.error is not None and first.error.startswith("handle_not_found"), first.history
    assert other.state is CallState.FAILED and other.error is not None, other.history


# --- step-up for a person ------------------------------------------------------------------------


async def test_a_person_is_asked_again_for_each_scope_the_server_names_up_to_commit(
    server: str, idp: Provider, kit: Kit, legacy_engine: Any
) -> None:
    alice, wire = Person("alice"), Wire()
    async with host_for(server, OAuth(idp.issuer, users=people("browser", alice)), wire) as host:
        await host.discover(ALICE)
        calls = await run_import(host, ALICE)
    assert [c.state for c in calls] == [CallState.COMPLETED] * 3, [c.history for c in calls]
    assert len(legacy_engine.committed_batches()) == 1
    asked = [set(request.scopes) for request in alice.asked]
    assert len(asked) == 3 and all(r.principal == ALICE and r.server == "eu" for r in alice.asked)
    assert READ in asked[0] and WRITE not in asked[0]  # what the 401 named
    assert {READ, WRITE} <= asked[1] and COMMIT not in asked[1]  # begin_import's 403
    assert {READ, WRITE, COMMIT} <= asked[2]  # commit_import's 403: the scope it named, and the rest kept
    assert all(r.url.startswith(f"{idp.issuer}/") for r in alice.asked)
    assert wire.statuses(403) == ["tools/call:begin_import", "tools/call:commit_import"]
    assert stored(kit) == [("alice", "acme")]


# --- two principals ------------------------------------------------------------------------------


async def test_two_principals_get_two_tokens_and_never_each_others(
    server: str, idp: Provider, kit: Kit, legacy_engine: Any
) -> None:
    wire, store = Wire(), RecordingStore()
    elsewhere = Principal("agent", "globex")  # the same id in another tenant: no credentials of its own
    oauth = OAuth(idp.issuer, services=services("agent", "other-agent"), store=store)
    async with host_for(server, oauth, wire) as host:
        for principal in (AGENT, OTHER):
            assert (await host.discover(principal)).ok
        both = await asyncio.gather(run_import(host, AGENT), run_import(host, OTHER))
        report = await host.discover(elsewhere)
        sent_before = len(wire.seen)
        with pytest.raises(PolicyDenied):
            await host.call(elsewhere, "eu.begin_import", {"target": "customers"})
    assert all(c.state is CallState.COMPLETED for calls in both for c in calls)
    assert len(legacy_engine.committed_batches()) == 2
    assert report.failures["eu"].kind == "no_credentials" and len(wire.seen) == sent_before
    assert sorted(store.keys(), key=lambda k: k.principal.id) == [
        TokenKey("eu", AGENT),
        TokenKey("eu", OTHER),
    ]
    whose = {c.trace_id: c.principal for calls in both for c in calls}
    checked = 0
    for method, _, bearer, trace in wire.seen:
        assert bearer is not None or method == "server/discover"  # only the very first has none
        if bearer is None:
            continue
        subject = claims_of(bearer)["sub"]
        assert subject in ("agent", "other-agent")
        if method.startswith("tools/call:"):
            assert subject == whose[trace], "a token went out on another principal's call"
            checked += 1
    assert checked == 10  # per principal: begin (403, then stepped up), add, commit (403, then stepped up)
    tokens = {p.id: {t.access_token for k, t in store.history if k.principal == p} for p in (AGENT, OTHER)}
    assert tokens["agent"] and tokens["other-agent"] and not tokens["agent"] & tokens["other-agent"]
    assert sorted(stored(kit)) == [("agent", "acme"), ("other-agent", "acme")]


# --- no token in logs or audit -------------------------------------------------------------------


async def test_no_token_secret_or_code_reaches_a_log_an_audit_event_or_a_record(
    server: str, idp: Provider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, the SDK's and httpx2's too
    alice, store, stager = Person("alice"), RecordingStore(), Principal("stager", "acme")
    oauth = OAuth(
        idp.issuer, services=services("agent", "stager"), users=people("browser", alice), store=store
    )
    async with host_for(server, oauth, principals={"agent", "alice", "stager"}) as host:
        for principal in (AGENT, ALICE, stager):
            assert (await host.discover(principal)).ok
        calls = await run_import(host, AGENT)
        begun = await host.call(stager, "eu.begin_import", {"target": "customers"})
        refused = await host.call(stager, "eu.commit_import", {"handle": begun.result["handle"]})
        read = await host.call(ALICE, "eu.get_import_status", {"handle": calls[0].result["handle"]})
        spec_text = repr(host.servers["eu"])
    assert calls[2].state is CallState.COMPLETED
    assert read.state is CallState.FAILED and read.error and read.error.startswith("handle_not_found")
    secrets_ = store.secrets() | {SECRET, *alice.codes}
    assert len(store.secrets()) >= 5 and alice.codes
    outcomes = {o for _, o, _ in token_events(host)}
    assert outcomes == {"token_granted", "token_refused"}  # the stager may not get the commit scope
    texts = [json.dumps(e.as_dict()) for e in host.audit.events]
    browser = ("httpx", "httpcore")  # the person's browser (tests/support/idp.sign_in) sees the code
    host_records = [r for r in caplog.records if r.name.split(".")[0] not in browser]
    assert any(r.name.startswith("httpcore2") for r in host_records)  # the host's HTTP, at DEBUG
    texts += [r.getMessage() + repr(r.__dict__) for r in host_records]
    texts += [repr(c) for c in (*calls, begun, refused, read)] + [spec_text]
    for text in texts:
        for secret in secrets_:
            assert secret not in text


# --- refusals ------------------------------------------------------------------------------------


async def test_a_scope_the_provider_will_not_grant_fails_the_call_as_refused_and_nothing_lands(
    server: str, idp: Provider, legacy_engine: Any
) -> None:
    stager = Principal("stager", "acme")  # registered for read and write, not for commit
    async with host_for(
        server, OAuth(idp.issuer, services=services("stager")), principals={"stager"}
    ) as host:
        await host.discover(stager)
        begun = await host.call(stager, "eu.begin_import", {"target": "customers"})
        handle = begun.result["handle"]
        await host.call(stager, "eu.add_record", {"handle": handle, "record": {"id": 1, "name": "a"}})
        commit = await host.call(stager, "eu.commit_import", {"handle": handle})
        status = await host.call(stager, "eu.get_import_status", {"handle": handle})
    # the server's 403 came back and the step-up was refused by the provider: refused, not unknown
    assert commit.state is CallState.FAILED and commit.status_action is None, commit.history
    assert commit.error is not None and "HTTP 403" in commit.error
    assert CallState.OUTCOME_UNKNOWN not in commit.states
    assert status.result["status"] == "open" and legacy_engine.committed_batches() == []
    assert token_events(host)[-1] == ("stager", "token_refused", "client_credentials: HTTP 400 invalid_scope")


class Recorder:
    """A server that must never be asked anything: it records every request it gets."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.requests.append(f"{scope['method']} {scope['path']}")
        response = JSONResponse({"issuer": "", "token_endpoint": ""}, status_code=200)
        await response(scope, receive, send)


def resource_naming(foreign: str) -> Starlette:
    """An MCP endpoint that asks for a token from ``foreign`` (its metadata names that issuer)."""

    async def mcp(request: Request) -> Response:
        base = f"{request.url.scheme}://{request.url.netloc}"
        challenge = f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
        return JSONResponse(
            {"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": challenge}
        )

    async def metadata(request: Request) -> Response:
        base = f"{request.url.scheme}://{request.url.netloc}"
        return JSONResponse({"resource": f"{base}/mcp", "authorization_servers": [foreign]})

    return Starlette(
        routes=[
            Route("/mcp", mcp, methods=["POST", "GET", "DELETE"]),
            Route("/.well-known/oauth-protected-resource/mcp", metadata),
        ]
    )


async def test_a_server_naming_another_authorization_server_gets_no_secret_and_no_person_is_sent_there(
    idp: Provider,
) -> None:
    recorder = Recorder()
    alice = Person("alice")
    async with serve_in_process(recorder) as foreign, serve_in_process(resource_naming(foreign)) as base:
        oauth = OAuth(idp.issuer, services=services("agent"), users=people("browser", alice))
        async with host_for(base + "/mcp", oauth) as host:
            reports = [await host.discover(principal) for principal in (AGENT, ALICE)]
    assert recorder.requests == []  # neither the client secret nor a person went to the other issuer
    assert alice.asked == []
    # the host's rule, not the server's fault: no credential can be had for it from the configured issuer
    failures = [report.failures["eu"] for report in reports]
    assert [f.kind for f in failures] == ["no_credentials", "no_credentials"]
    assert all("refused" in f.reason and idp.issuer in f.reason for f in failures)
    assert token_events(host) == []


# --- the configuration and the docs' example -----------------------------------------------------


def test_oauth_is_for_http_servers_instead_of_static_tokens_and_keeps_its_secrets_out_of_reprs() -> None:
    oauth = OAuth("https://id.example.com", services=services("agent"))
    with pytest.raises(ValueError, match="instead of credentials"):
        ServerSpec(
            "eu", "https://eu.example.com/mcp", {AGENT: "static"}, transport=HTTP_DECISION, oauth=oauth
        )
    with pytest.raises(ValueError, match="instead of credentials"):
        ServerSpec("eu", stdio=StdioServer("server"), transport=HTTP_DECISION, oauth=oauth)
    with pytest.raises(ValueError, match=r"services .* or users"):
        OAuth("https://id.example.com")
    with pytest.raises(ValueError, match="http"):
        OAuth("id.example.com", services=services("agent"))
    spec = ServerSpec("eu", "https://eu.example.com/mcp", transport=HTTP_DECISION, oauth=oauth)
    assert spec.has_credentials(AGENT) and not spec.has_credentials(Principal("agent", "globex"))
    assert SECRET not in repr(spec) and "MemoryTokenStore(0 keys)" in repr(spec)


async def test_the_docs_oauth_example_commits_as_a_service_and_as_a_person(
    server: str, idp: Provider, kit: Kit, legacy_engine: Any
) -> None:
    namespace = examples()

    async def browser(principal: Principal, url: str) -> dict[str, str]:
        return await anyio.to_thread.run_sync(sign_in, url, principal.id)

    async with namespace["oauth_host"](server, idp.issuer, SECRET, browser) as host:
        calls = [await namespace["commit_as"](host, who) for who in (AGENT, ALICE)]
    assert [c.state for c in calls] == [CallState.COMPLETED] * 2, [c.history for c in calls]
    assert len(legacy_engine.committed_batches()) == 2
    assert sorted(stored(kit)) == [("agent", "acme"), ("alice", "acme")]
