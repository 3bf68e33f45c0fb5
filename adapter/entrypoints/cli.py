"""The command line: ``python -m adapter migrate | downgrade | serve | stdio | reconcile | demo | ops |
check-port | new-port``.

Each command parses its arguments, builds the kit from settings and calls the service layer; it owns
no business rule. Configuration errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from adapter.config import ConfigError, Settings, load_settings

__all__ = ["main"]


def _migrate(settings: Settings, args: argparse.Namespace) -> int:
    from adapter.startup import create_owner_only
    from adapter.store.migrate import upgrade

    create_owner_only(settings)
    upgrade(settings.database_url, args.revision)
    print(f"database migrated to {args.revision}")
    return 0


def _downgrade(settings: Settings, args: argparse.Namespace) -> int:
    from adapter.store.migrate import downgrade

    downgrade(settings.database_url, args.revision)
    print(f"database downgraded to {args.revision}")
    return 0


def _demo(settings: Settings, args: argparse.Namespace) -> int:
    from adapter.entrypoints.demo import run_demo

    return run_demo(records=args.records)


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    from adapter.entrypoints.serve import serve_http

    port = int(os.environ["PORT"]) if os.environ.get("PORT") else args.port
    if args.workers > 1:
        from adapter.entrypoints.workers import serve_workers

        return serve_workers(settings, args.host, port, args.workers)
    return serve_http(settings, args.host, port)


def _stdio(settings: Settings, args: argparse.Namespace) -> int:
    from adapter.entrypoints.serve import serve_stdio

    return serve_stdio(settings)


def _reconcile(settings: Settings, args: argparse.Namespace) -> int:
    """One maintenance pass, then exit, printing what it resolved."""
    from datetime import timedelta

    from adapter.bootstrap import build

    kit = build(settings)
    try:
        retention = timedelta(days=settings.retention_days) if args.purge else None
        # A commit left before COMMIT by a dead worker is run again, and waited for, before exiting.
        report = kit.service.maintain(retention=retention, purge_batch=settings.purge_batch_size, wait=True)
    finally:
        kit.close()
    for r in report.resolutions:
        print(f"operation {r.operation_id} (import {r.import_id}): {r.previous} -> {r.status} ({r.finding})")
    for state in report.compensations:
        print(f"compensation resumed: import now {state}")
    print(
        f"reconciled {len(report.resolutions)}, compensations resumed {len(report.compensations)}, "
        f"expired imports closed {report.expired}" + (f", purged {report.purged}" if report.purged else "")
    )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m adapter", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    migrate = commands.add_parser("migrate", help="upgrade the database schema")
    migrate.add_argument("--revision", default="head")
    migrate.set_defaults(run=_migrate)
    down = commands.add_parser("downgrade", help="downgrade the database schema")
    down.add_argument("--revision", default="base")
    down.set_defaults(run=_downgrade)
    serve = commands.add_parser("serve", help="serve MCP over Streamable HTTP at /mcp")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=3000, help="PORT in the environment overrides it")
    serve.add_argument(
        "--workers", type=int, default=1, help="worker processes (>1 needs PostgreSQL and ADAPTER_SECRET)"
    )
    serve.set_defaults(run=_serve)
    stdio = commands.add_parser("stdio", help="serve MCP over stdio (logs on stderr)")
    stdio.set_defaults(run=_stdio)
    reconcile = commands.add_parser("reconcile", help="one reconciliation and retention pass, then exit")
    reconcile.add_argument("--purge", action="store_true", help="also purge finished records past retention")
    reconcile.set_defaults(run=_reconcile)
    demo = commands.add_parser("demo", help="an end-to-end run against the simulator over TCP")
    demo.add_argument("--records", type=int, default=1200)
    demo.set_defaults(run=_demo)
    from adapter.entrypoints.ops_cli import configure_parser as configure_ops

    configure_ops(commands.add_parser("ops", help="list, show, reconcile, compensate, resolve operations"))
    from adapter.entrypoints.check_port import configure_parser as configure_check_port
    from adapter.entrypoints.scaffold import configure_parser as configure_new_port

    configure_check_port(commands.add_parser("check-port", help="check a legacy port against the contract"))
    configure_new_port(commands.add_parser("new-port", help="write a package with a port skeleton and tests"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    run: Callable[[Settings, argparse.Namespace], int] = args.run
    try:
        settings = load_settings()
        from adapter.startup import warn_about_unknown_settings

        warn_about_unknown_settings(os.environ)
        return run(settings, args)
    except ConfigError as exc:
        print(f"adapter: {exc}", file=sys.stderr)
        return 2
