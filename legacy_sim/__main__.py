"""Command line: ``python -m legacy_sim serve ...`` runs a TCP simulator; ``dump`` prints its batches.

``serve`` prints exactly one line, ``legacy_sim listening on HOST:PORT``, once it accepts connections
(so a parent process can wait for it and learn the real port when ``--port 0``), then runs until
SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from legacy_sim.engine import DEFAULT_IDLE_TIMEOUT, LegacyEngine
from legacy_sim.faults import Faults
from legacy_sim.server import start_server


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m legacy_sim", description="Simulated legacy import system"
    )
    sub = parser.add_subparsers(dest="cmd", required=True)

    serve = sub.add_parser("serve", help="run the TCP simulator")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument("--db", required=True, help="SQLite file (created if missing)")
    serve.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT, help="seconds; 0 disables")
    serve.add_argument("--latency-ms", type=float, default=0)
    serve.add_argument("--error-rate", type=float, default=0.0)
    serve.add_argument(
        "--drop-after-commit",
        type=float,
        nargs="?",
        const=1.0,
        default=0.0,
        metavar="P",
        help="probability of dropping the connection after applying COMMIT (flag alone: 1.0)",
    )
    serve.add_argument("--seed", type=int, default=None)

    dump = sub.add_parser("dump", help="print committed batches as JSON lines")
    dump.add_argument("--db", required=True)
    return parser


def _serve(args: argparse.Namespace) -> int:
    try:
        faults = Faults(
            latency_ms=args.latency_ms,
            error_rate=args.error_rate,
            drop_after_commit=args.drop_after_commit,
            seed=args.seed,
        )
    except ValueError as exc:
        print(f"legacy_sim: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    idle_timeout = args.idle_timeout if args.idle_timeout > 0 else None
    engine = LegacyEngine(args.db, faults, idle_timeout=idle_timeout)
    try:
        server = start_server(engine, args.host, args.port)
    except OSError as exc:
        engine.close()
        print(f"legacy_sim: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    try:
        host, port = server.address
        print(f"legacy_sim listening on {host}:{port}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        server.close()
        engine.close()
    return 0


def _dump(args: argparse.Namespace) -> int:
    if not Path(args.db).is_file():
        print(f"legacy_sim: no database at {args.db}", file=sys.stderr)
        return 1
    engine = LegacyEngine(args.db, idle_timeout=None)
    try:
        for batch in engine.committed_batches():
            sys.stdout.write(json.dumps(batch, ensure_ascii=False) + "\n")
    finally:
        engine.close()
    sys.stdout.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    return _serve(args) if args.cmd == "serve" else _dump(args)


if __name__ == "__main__":
    sys.exit(main())
