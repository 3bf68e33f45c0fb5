"""Several worker processes behind one port: ``python -m adapter serve --workers N``.

uvicorn's own supervisor starts the workers (fresh interpreters, ``spawn``) and restarts one that
dies; each worker calls :func:`worker_app`, so everything a process holds (its ``worker_id`` for
leases, its connection pool, its listen streams, its maintenance loop) is built after the fork, in
the worker. The supervisor itself builds nothing and never migrates: ``python -m adapter migrate``
runs once, before, and each worker only checks that the schema is current.

Several workers need what one process can do without: one secret shared by all (``ADAPTER_SECRET``;
a key file could differ between hosts) and a database every worker reaches (PostgreSQL; SQLite is one
file on one host with one writer). The refusal is one line (exit 2).
"""

from __future__ import annotations

import os
import sys

from fastapi import FastAPI

from adapter.config import ConfigError, Settings, load_settings

__all__ = ["check_scale_out", "check_schema_current", "serve_workers", "worker_app"]

_PUBLIC_URL = "ADAPTER_WORKER_PUBLIC_URL"  # passed from the supervisor to its workers


def check_scale_out(settings: Settings, workers: int) -> None:
    """Refuse a multi-worker start that would break handles, idempotency or the change feed."""
    if workers <= 1:
        return
    if not settings.secret:
        raise ConfigError(
            f"--workers {workers} needs ADAPTER_SECRET: every worker must derive handles from the same secret"
        )
    if not settings.database_url.startswith("postgresql"):
        raise ConfigError(
            f"--workers {workers} needs PostgreSQL (ADAPTER_DATABASE_URL=postgresql+psycopg://...): "
            "SQLite serves one process"
        )


def check_schema_current(database_url: str) -> None:
    """The supervisor's one look at the database: migrated to head, else one line and no workers."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from adapter.store.engine import make_engine
    from adapter.store.migrate import alembic_config

    head = ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
    if current != head:
        raise ConfigError(
            f"the database is at revision {current or 'none'}, not {head}: run `python -m adapter migrate` "
            "once before starting the workers"
        )


def serve_workers(settings: Settings, host: str, port: int, workers: int) -> int:
    import uvicorn

    from adapter.entrypoints.serve import _is_loopback, configure_logging

    check_scale_out(settings, workers)
    if settings.local_mode and not _is_loopback(host):
        raise ConfigError(
            "local mode (ADAPTER_TOKENS not set) serves loopback only; set ADAPTER_TOKENS to bind " + host
        )
    check_schema_current(settings.database_url)
    configure_logging()
    os.environ[_PUBLIC_URL] = f"http://{host}:{port}"
    print(f"adapter: MCP at http://{host}:{port}/mcp ({workers} workers)", file=sys.stderr, flush=True)
    uvicorn.run(
        "adapter.entrypoints.workers:worker_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=10,  # listen streams stay open: do not wait for them forever
    )
    return 0


def worker_app() -> FastAPI:
    """Called by uvicorn in each worker process, after the fork."""
    from adapter.bootstrap import build
    from adapter.entrypoints.http.app import create_app
    from adapter.entrypoints.serve import configure_logging

    configure_logging()
    settings = load_settings()
    kit = build(settings)
    app = create_app(kit, public_url=os.environ.get(_PUBLIC_URL, "http://127.0.0.1:3000"))
    print(
        f"adapter: worker {kit.service.ctx.worker_id} (pid {os.getpid()}) ready", file=sys.stderr, flush=True
    )
    return app
