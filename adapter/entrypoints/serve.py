"""Running the MCP server: over HTTP (uvicorn) or over stdio.

Logs go to stderr as one JSON line per request (``adapter.requests``). On stdio, stdout carries
only MCP messages. The kit is imported inside the two entry functions: the supervisor of
``serve --workers N`` imports this module for its two helpers and builds nothing (it stayed at
117 MB of RSS beside its workers when it imported everything).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import sys

from adapter.config import ConfigError, Settings

__all__ = ["configure_logging", "serve_http", "serve_stdio"]


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s", force=True)
    for noisy in ("mcp", "httpx", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_http(settings: Settings, host: str, port: int) -> int:
    import uvicorn

    from adapter.bootstrap import build
    from adapter.entrypoints.collector import settle_collector
    from adapter.entrypoints.http.app import create_app
    from adapter.entrypoints.http.connections import uvicorn_options
    from adapter.startup import check_schema_current, check_serving

    if settings.local_mode and not _is_loopback(host):
        raise ConfigError(
            "local mode (ADAPTER_TOKENS and ADAPTER_OAUTH_ISSUER not set) serves loopback only; set one "
            "of them to bind " + host
        )
    check_serving(settings)
    check_schema_current(settings.database_url)
    configure_logging()
    kit = build(settings)
    try:
        app = create_app(kit, public_url=f"http://{host}:{port}")
        ttl = settings.local_ttl_seconds
        local = f"local mode: no auth, loopback only, handles are bearer secrets valid {ttl}s"
        mode = (
            local
            if settings.local_mode
            else f"OAuth resource server of {settings.oauth_issuer}"
            if settings.resource_server
            else "bearer tokens from ADAPTER_TOKENS"
        )
        print(f"adapter: MCP at http://{host}:{port}/mcp ({mode})", file=sys.stderr, flush=True)
        settle_collector()
        uvicorn.run(
            app, host=host, port=port, log_level="warning", lifespan="on", **uvicorn_options(settings)
        )
    finally:
        kit.close()
    return 0


def serve_stdio(settings: Settings) -> int:
    """Serve one host over stdio. The host started this process, so it is the one local principal;
    bearer tokens and the identity provider (ADAPTER_TOKENS, ADAPTER_OAUTH_*) belong to HTTP and are
    ignored here."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    from adapter.bootstrap import build
    from adapter.entrypoints.background import run_maintenance_loop
    from adapter.entrypoints.collector import settle_collector
    from adapter.entrypoints.mcp.eras import lock_stdio_era
    from adapter.entrypoints.mcp.feed import run_event_feed
    from adapter.entrypoints.mcp.server import McpGateway
    from adapter.startup import check_schema_current, check_serving

    settings = settings.model_copy(update={"tokens": None, "oauth_issuer": None})
    check_serving(settings)
    check_schema_current(settings.database_url)
    configure_logging()
    kit = build(settings)
    gateway = McpGateway(kit.service, settings)

    async def main() -> None:
        async with (
            kit.store.async_reads(settings.db_pool_size, settings.db_pool_timeout_seconds),
            stdio_server() as (read, write),
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(
                functools.partial(
                    run_event_feed,
                    kit.service,
                    gateway.publish_changes,
                    listening=gateway.has_audience,
                    arrivals=gateway.watch_audience,
                )
            )
            tasks.start_soon(run_maintenance_loop, kit.service, settings)
            # The first request fixes the era; a 2026-07-28 request after initialize gets -32022.
            forward, inbound = anyio.create_memory_object_stream[SessionMessage | Exception]()
            tasks.start_soon(lock_stdio_era, read, forward, write)
            async with inbound:
                await gateway.server.run(inbound, write, gateway.server.create_initialization_options())
            tasks.cancel_scope.cancel()

    settle_collector()
    try:
        anyio.run(main)
    finally:
        gateway.close()
        kit.service.hand_over()  # running commits stop before COMMIT; the next process resumes them
        kit.close()
    return 0
