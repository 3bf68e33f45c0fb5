"""The HTTP application: one FastAPI app with the MCP endpoint at ``/mcp`` beside ``/healthz``,
``/readyz``, ``/metrics`` (Prometheus, see ``metrics.py``) and the admin side under ``/admin``.

Built by a factory (``create_app``) from an already wired :class:`~adapter.bootstrap.Kit`, so tests
build as many as they like. The MCP sub-app's own lifespan never runs when mounted, so this app's
lifespan runs the SDK session manager and the event feed. A request for exactly ``/mcp`` skips
FastAPI's own layers (:class:`AdapterApp`) and goes through the body limit and the era guard
straight to the SDK.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import anyio.to_thread
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.types import ASGIApp, Receive, Scope, Send

from adapter import __version__
from adapter.bootstrap import Kit
from adapter.config import Settings
from adapter.entrypoints.admin import admin_router
from adapter.entrypoints.admin.provider import ProviderOperators
from adapter.entrypoints.background import run_maintenance_loop
from adapter.entrypoints.http.answers import answer_per_request
from adapter.entrypoints.http.callers import RequestBudget, install_caller_gate
from adapter.entrypoints.http.guard import EraGuard
from adapter.entrypoints.http.limits import BodyLimit, HostOriginGuard
from adapter.entrypoints.http.metrics import AdapterMetrics, metrics_router
from adapter.entrypoints.mcp.feed import run_event_feed
from adapter.entrypoints.mcp.identity import StaticTokenVerifier, load_token_file
from adapter.entrypoints.mcp.server import McpGateway
from adapter.entrypoints.oauth import ResourceServer, check_oauth_settings
from adapter.entrypoints.oauth.guard import ResourceServerGuard
from adapter.legacy.instrumented import InstrumentedPort
from adapter.services.operator_sessions import LoginThrottle, OperatorSessions
from adapter.startup import warn_about_token_file

__all__ = ["AdapterApp", "create_app", "transport_security"]

MCP_PATH = "/mcp"
log = logging.getLogger("adapter.auth")
LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOCAL_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """Host and Origin allowlists: localhost forms always, plus what the operator configured."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*LOCAL_HOSTS, *settings.allowed_hosts],
        allowed_origins=[*LOCAL_ORIGINS, *settings.allowed_origins],
    )


class AdapterApp(FastAPI):
    """FastAPI for the admin API, health and metrics; ``/mcp`` straight to the MCP stack.

    Every MCP call used to go through FastAPI's middleware (errors, telemetry, its body limit,
    the exit stack), its router and a mount before the SDK's own app: about 9% of a loaded
    worker's Python time (py-spy under ``bench/load.py``), for nothing the MCP endpoint uses. The
    SDK's app answers errors and checks Host and Origin itself, behind the same body limit.
    Other paths (``/mcp/`` included) take the full FastAPI route, which still mounts the MCP app.
    """

    mcp_stack: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.mcp_stack is not None and scope["type"] == "http" and scope["path"] == MCP_PATH:
            scope["app"] = self  # what Starlette would set: the SDK's request objects find the app
            await self.mcp_stack(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(
    kit: Kit, *, public_url: str = "http://127.0.0.1:3000", run_maintenance: bool = True
) -> AdapterApp:
    settings = kit.settings
    metrics = AdapterMetrics(kit.admin)  # this app's own registry; see adapter/entrypoints/http/metrics.py
    gateway = McpGateway(kit.service, settings, on_request=metrics.observe_request)
    metrics.known_tools = frozenset(gateway.tools)
    if isinstance(kit.legacy, InstrumentedPort):  # bootstrap.build wraps the port so every call is timed
        kit.legacy.add_observer(metrics.observe_legacy)
    check_oauth_settings(settings)
    auth_kwargs: dict[str, object] = {}
    resource_server: ResourceServer | None = None
    if settings.resource_server:  # the identity provider's tokens (adapter/entrypoints/oauth/)
        audience = settings.oauth_audience or public_url.rstrip("/") + MCP_PATH
        if settings.oauth_audience is None:
            log.warning("ADAPTER_OAUTH_AUDIENCE is not set: tokens must name %s in aud", audience)
        resource_server = ResourceServer(settings, audience=audience, published_tools=gateway.tools)
    elif settings.tokens is not None:  # the token file
        warn_about_token_file(settings)
        auth_kwargs = {
            "token_verifier": StaticTokenVerifier(load_token_file(settings.tokens)),
            # Static tokens name no audience; the token file itself says which server they are for.
            # No resource_server_url: there is no OAuth authorization server behind these tokens, so
            # no protected-resource metadata may name one (a 401 says only "Bearer").
            "auth": AuthSettings(
                issuer_url=AnyHttpUrl(public_url),
                resource_server_url=None,
                validate_token_resource=False,
            ),
        }
    mcp_app = gateway.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        json_response=False,  # SSE where a call reports progress or asks the user (see below)
        # Affects only the legacy (2025) era: a session per initialize, held by this worker, so the
        # client's answers to elicitation and its notifications/cancelled reach the request they
        # belong to. Several workers need sticky routing by Mcp-Session-Id (docs/operations.md); an
        # unknown or reaped session id gets 404 and the client initializes again.
        stateless_http=False,
        session_idle_timeout=settings.legacy_session_idle_seconds,
        # The process's bound; each principal holds fewer (max_legacy_sessions_per_principal, below).
        max_sessions=settings.legacy_max_sessions,
        max_request_body_size=settings.body_limit(),  # the same limit as BodyLimit's, so one answers
        transport_security=transport_security(settings),
        **auth_kwargs,  # type: ignore[arg-type]
    )
    # 2025-era sessions answer in plain JSON whatever cannot need the stream, and are counted per
    # principal (answers.py); what a caller's requests cost is charged to it (callers.py).
    answer_per_request(gateway.server.session_manager, gateway.streamed_tools, gateway.legacy_session_slots)
    install_caller_gate(
        mcp_app,
        budget=RequestBudget(
            settings.max_request_bytes_per_second_per_principal,
            settings.max_json_elements_per_second_per_principal,
            settings.max_requests_per_second_per_principal,
        ),
        max_depth=settings.max_json_depth,
        max_elements=settings.max_json_elements,
        local_mode=settings.local_mode,
        sessions=gateway.legacy_session_slots,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            AsyncExitStack() as stack,
            kit.store.async_reads(settings.db_pool_size, settings.db_pool_timeout_seconds),
            gateway.server.session_manager.run(),
            anyio.create_task_group() as tasks,
        ):
            if resource_server is not None:
                await stack.enter_async_context(resource_server.running())
                tasks.start_soon(resource_server.warm_up)  # the issuer's keys, before the first token
            tasks.start_soon(
                functools.partial(
                    run_event_feed,
                    kit.service,
                    gateway.publish_changes,
                    catch_up_seconds=settings.event_catch_up_seconds,
                    listening=gateway.has_audience,
                    arrivals=gateway.watch_audience,
                )
            )
            if run_maintenance:
                tasks.start_soon(run_maintenance_loop, kit.service, settings)
            try:
                yield
            finally:
                gateway.close()
                # Commits running here stop before COMMIT and free their lease: another worker (or
                # this one after its restart) resumes them at once (services/commit/runner.py).
                await anyio.to_thread.run_sync(kit.service.hand_over)
                tasks.cancel_scope.cancel()

    # /docs and /redoc load scripts from a CDN: off unless ADAPTER_API_DOCS (openapi.json loads nothing).
    docs = settings.api_docs
    app = AdapterApp(
        title="legacy import adapter",
        version=__version__,
        lifespan=lifespan,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
    )
    app.state.gateway = gateway
    app.state.kit = kit
    app.state.resource_server = resource_server
    app.state.metrics = metrics
    app.state.operator_sessions = OperatorSessions(
        kit.store, lifetime_seconds=settings.operator_session_seconds, clock=lambda: kit.admin.ctx.clock()
    )
    app.state.login_throttle = LoginThrottle(
        max_failures=settings.login_max_failures, window_seconds=settings.login_failure_window_seconds
    )
    app.include_router(admin_router())
    app.include_router(metrics_router(metrics))

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """The process is up (it says nothing about the database or the legacy system)."""
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["health"],
        summary="Ready to serve",
        responses={503: {"description": 'Not ready: `{"status": "unavailable", "problems": [...]}`'}},
    )
    def readyz() -> JSONResponse:
        """The database and the legacy system answer (200), else 503 with the reasons.

        Open (no token): the reasons name only what is unreachable and the error type.
        """
        problems = kit.admin.check_ready()
        if problems:
            return JSONResponse({"status": "unavailable", "problems": problems}, status_code=503)
        return JSONResponse({"status": "ready", "problems": []})

    served: ASGIApp = mcp_app
    if resource_server is not None:
        # RFC 9728 metadata (before the mount, which would take every path), and the 401/403 guard.
        app.router.routes.extend(resource_server.metadata_routes(MCP_PATH))
        served = ResourceServerGuard(mcp_app, resource_server, MCP_PATH)
        app.add_middleware(ProviderOperators, server=resource_server, settings=settings)
    guarded_mcp = EraGuard(served, settings.protocol_eras)
    app.mount("/", guarded_mcp)
    # Outermost first: Host/Origin, then the body size, both before any parsing or authentication.
    app.add_middleware(BodyLimit, limit=settings.body_limit(), admin_limit=settings.admin_max_body_bytes)
    app.add_middleware(
        HostOriginGuard,
        allowed_hosts=[*LOCAL_HOSTS, *settings.allowed_hosts],
        allowed_origins=[*LOCAL_ORIGINS, *settings.allowed_origins],
        dashboard_origins=settings.dashboard_allowed_origins,
    )
    app.mcp_stack = BodyLimit(
        guarded_mcp, limit=settings.body_limit(), admin_limit=settings.admin_max_body_bytes
    )
    return app
