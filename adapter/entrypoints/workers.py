"""Several worker processes behind one port: ``python -m adapter serve --workers N``.

The supervisor starts the workers (fresh interpreters, ``spawn``) and starts another when one dies;
each worker calls :func:`worker_app`, so everything a process holds (its ``worker_id`` for leases,
its connection pool, its listen streams, its maintenance loop) is built after the fork, in the
worker. The supervisor itself builds nothing and never migrates: ``python -m adapter migrate`` runs
once, before, and the supervisor only checks that the schema is current.

**Each worker listens on a socket of its own** (``SO_REUSEPORT``, on Linux), and the kernel spreads
new connections over them. With one shared socket (uvicorn's ``--workers``), whichever worker woke
first accepted every connection waiting: 32 clients connecting at once all landed on one worker and
stayed there (HTTP keep-alive), so a second worker added nothing (``bench/load.py``). Elsewhere,
where ``SO_REUSEPORT`` does not spread connections, uvicorn's supervisor and its shared socket
are used.

Several workers need what one process can do without: one secret shared by all (``ADAPTER_SECRET``;
a key file could differ between hosts) and a database every worker reaches (PostgreSQL; SQLite is one
file on one host with one writer). The refusal is one line (exit 2).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

from fastapi import FastAPI

from adapter.config import ConfigError, Settings, load_settings
from adapter.startup import check_schema_current

__all__ = [
    "WorkerSupervisor",
    "check_scale_out",
    "check_schema_current",
    "listening_socket",
    "serve_workers",
    "worker_app",
]

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


def serve_workers(settings: Settings, host: str, port: int, workers: int) -> int:
    import uvicorn

    from adapter.entrypoints.http.connections import uvicorn_options
    from adapter.entrypoints.serve import _is_loopback, configure_logging

    check_scale_out(settings, workers)
    if settings.local_mode and not _is_loopback(host):
        raise ConfigError(
            "local mode (ADAPTER_TOKENS and ADAPTER_OAUTH_ISSUER not set) serves loopback only; set one "
            "of them to bind " + host
        )
    check_schema_current(settings.database_url, before="starting the workers")
    configure_logging()
    try:
        supervisor = WorkerSupervisor(host, port, workers) if sys.platform.startswith("linux") else None
    except OSError as exc:  # the port is taken, or the address is not this host's
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    port = supervisor.port if supervisor is not None else port
    os.environ[_PUBLIC_URL] = f"http://{host}:{port}"
    print(f"adapter: MCP at http://{host}:{port}/mcp ({workers} workers)", file=sys.stderr, flush=True)
    if supervisor is not None:
        return supervisor.run()
    options = {**UVICORN_OPTIONS, **uvicorn_options(settings)}
    uvicorn.run(APP, factory=True, host=host, port=port, workers=workers, **options)
    return 0


APP = "adapter.entrypoints.workers:worker_app"
UVICORN_OPTIONS: dict[str, Any] = {
    "log_level": "warning",
    "lifespan": "on",
    "timeout_graceful_shutdown": 10,  # listen streams stay open: do not wait for them forever
}
STARTUP_FAILURE = 3  # uvicorn's exit code for a worker whose app or lifespan failed to start
STOP_SECONDS = 20.0


def listening_socket(host: str, port: int, *, listen: bool = True) -> socket.socket:
    """A TCP socket on ``host:port`` that other ``SO_REUSEPORT`` sockets of this user may share."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    if listen:
        sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def _worker_main(host: str, port: int) -> None:  # pragma: no cover - runs in the worker process
    """A worker: its own listening socket on the shared port, then uvicorn on it."""
    import uvicorn

    from adapter.entrypoints.http.connections import uvicorn_options

    sock = listening_socket(host, port)
    # The worker's own reading of the settings (spawned: a fresh interpreter with the same environment).
    config = uvicorn.Config(APP, factory=True, **UVICORN_OPTIONS, **uvicorn_options(load_settings()))
    uvicorn.Server(config).run(sockets=[sock])


class WorkerSupervisor:
    """Keeps ``workers`` worker processes running until SIGTERM or SIGINT, then stops them.

    The supervisor holds the port with a bound socket that never listens: a process that is not
    part of the ``SO_REUSEPORT`` group cannot take the port, and none of the connections come to
    this socket (only listening sockets get them). A worker that fails to start stops the whole
    server (its error is in the log); one that dies later is replaced.
    """

    def __init__(self, host: str, port: int, workers: int) -> None:
        self.host = host
        self.workers = workers
        self._port_holder = listening_socket(host, port, listen=False)  # OSError: the port is taken
        self.port = int(self._port_holder.getsockname()[1])  # port 0: the one the kernel chose
        self._spawn = multiprocessing.get_context("spawn")
        self._stop = threading.Event()

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self._stop.set())
        processes = [self._start() for _ in range(self.workers)]
        code = 0
        try:
            while not self._stop.wait(0.5):
                for index, process in enumerate(processes):
                    if process.is_alive():
                        continue
                    if process.exitcode == STARTUP_FAILURE:
                        print("adapter: a worker failed to start; stopping", file=sys.stderr, flush=True)
                        code = STARTUP_FAILURE
                        self._stop.set()
                        break
                    print(
                        f"adapter: worker pid {process.pid} exited ({process.exitcode}); starting another",
                        file=sys.stderr,
                        flush=True,
                    )
                    processes[index] = self._start()
        finally:
            self._stop_all(processes)
            self._port_holder.close()
        return code

    def _start(self) -> multiprocessing.process.BaseProcess:
        process = self._spawn.Process(target=_worker_main, args=(self.host, self.port), daemon=False)
        process.start()
        return process

    @staticmethod
    def _stop_all(processes: list[multiprocessing.process.BaseProcess]) -> None:
        """SIGTERM (uvicorn's graceful shutdown), then SIGKILL for what is still there after a while."""
        for process in processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(5)


def worker_app() -> FastAPI:
    """Called by uvicorn in each worker process, after the fork."""
    from adapter.bootstrap import build
    from adapter.entrypoints.collector import settle_collector
    from adapter.entrypoints.http.app import create_app
    from adapter.entrypoints.serve import configure_logging

    configure_logging()
    settings = load_settings()
    kit = build(settings)
    app = create_app(kit, public_url=os.environ.get(_PUBLIC_URL, "http://127.0.0.1:3000"))
    settle_collector()
    print(
        f"adapter: worker {kit.service.ctx.worker_id} (pid {os.getpid()}) ready", file=sys.stderr, flush=True
    )
    return app
