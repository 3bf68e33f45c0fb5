"""Shared fixtures: real simulator engines, in-process TCP servers, clients and subprocess helpers.

* ``engine_factory(**kw)``: a ``LegacyEngine`` on a file under ``tmp_path`` (closed at teardown).
* ``server_factory(engine=None, **engine_kw)``: a started ``SimulatorServer`` on port 0.
* ``sim_server``: a default server; ``.address`` is ``(host, port)``, ``.engine`` the engine.
* ``connect``: opens ``LegacyClient`` connections to ``sim_server`` (closed at teardown).
* ``backend``: parametrised over ``tcp`` and ``inprocess`` for tests of shared semantics.
* ``sim_process_factory(db, *flags)``: ``python -m legacy_sim serve`` subprocesses (for restarts).
* ``run_legacy_sim(*args)``: run ``python -m legacy_sim`` to completion; ``fake_clock``: manual clock.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapter.legacy.simulator import SimulatorPort
from legacy_sim.client import LegacyClient, SimClient
from legacy_sim.engine import LegacyEngine
from legacy_sim.inprocess import InProcessClient
from legacy_sim.server import SimulatorServer, start_server
from tests.support.cli import run_module

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 10.0


class FakeClock:
    """A manual clock for in-process idle-timeout tests (no sleeping)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def engine_factory(tmp_path: Path) -> Iterator[Callable[..., LegacyEngine]]:
    with contextlib.ExitStack() as made:

        def make(name: str = "legacy.db", **kwargs: Any) -> LegacyEngine:
            kwargs.setdefault("idle_timeout", 10.0)
            return made.enter_context(contextlib.closing(LegacyEngine(tmp_path / name, **kwargs)))

        yield make


@pytest.fixture
def server_factory(engine_factory: Callable[..., LegacyEngine]) -> Iterator[Callable[..., SimulatorServer]]:
    with contextlib.ExitStack() as made:

        def make(engine: LegacyEngine | None = None, **engine_kwargs: Any) -> SimulatorServer:
            server = start_server(engine or engine_factory(**engine_kwargs), "127.0.0.1", 0)
            return made.enter_context(contextlib.closing(server))

        yield make


@pytest.fixture
def sim_server(server_factory: Callable[..., SimulatorServer]) -> SimulatorServer:
    return server_factory()


@pytest.fixture
def connect(sim_server: SimulatorServer) -> Iterator[Callable[[], LegacyClient]]:
    clients: list[LegacyClient] = []

    def make() -> LegacyClient:
        client = LegacyClient(*sim_server.address, timeout=5.0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@dataclass
class Backend:
    """One simulator reached either over TCP or in-process; ``connect()`` opens a new session."""

    kind: str
    engine: LegacyEngine
    server: SimulatorServer | None = None
    clients: list[SimClient] = field(default_factory=list)

    def connect(self) -> SimClient:
        client: SimClient
        if self.server is not None:
            client = LegacyClient(*self.server.address, timeout=5.0)
        else:
            client = InProcessClient(self.engine)
        self.clients.append(client)
        return client


@pytest.fixture(params=["tcp", "inprocess"])
def backend(
    request: pytest.FixtureRequest,
    engine_factory: Callable[..., LegacyEngine],
    server_factory: Callable[..., SimulatorServer],
) -> Iterator[Backend]:
    engine = engine_factory()
    server = server_factory(engine) if request.param == "tcp" else None
    backend = Backend(request.param, engine, server)
    yield backend
    for client in backend.clients:
        client.close()


@dataclass
class SimProcess:
    proc: subprocess.Popen[str]
    host: str
    port: int

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=READY_TIMEOUT)
        finally:
            if self.proc.stdout:
                self.proc.stdout.close()


def start_sim_process(db: Path, *extra: str) -> SimProcess:
    """Run ``python -m legacy_sim serve`` on port 0 and wait (bounded) for its ready line."""
    cmd = [sys.executable, "-m", "legacy_sim", "serve", "--host", "127.0.0.1", "--port", "0", "--db", str(db)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(cmd + list(extra), stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env)
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + READY_TIMEOUT
    try:
        while time.monotonic() < deadline:
            if selector.select(timeout=deadline - time.monotonic()):
                line = proc.stdout.readline()
                prefix = "legacy_sim listening on "
                if line.startswith(prefix):
                    host, _, port = line[len(prefix) :].strip().rpartition(":")
                    return SimProcess(proc, host, int(port))
                if not line:
                    break
        raise AssertionError(f"legacy_sim did not start (exit code {proc.poll()})")
    except BaseException:
        proc.kill()
        proc.wait(timeout=READY_TIMEOUT)
        raise
    finally:
        selector.close()


@pytest.fixture
def sim_process_factory() -> Iterator[Callable[..., SimProcess]]:
    """Start ``python -m legacy_sim serve`` subprocesses; any still running are stopped at teardown."""
    started: list[SimProcess] = []

    def make(db: Path, *extra: str) -> SimProcess:
        process = start_sim_process(db, *extra)
        started.append(process)
        return process

    yield make
    for process in started:
        if process.proc.poll() is None:
            process.proc.kill()
        process.stop()


def _run_module(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return run_module("legacy_sim", *args, cwd=REPO_ROOT, env=env, timeout=READY_TIMEOUT)


@pytest.fixture
def run_legacy_sim() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``python -m legacy_sim ARGS`` to completion (bounded) and return the completed process."""
    return _run_module


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["tcp", "inprocess"])
def port_and_engine(request, engine_factory, server_factory):
    """The simulator port over TCP and in process, with the engine behind it."""
    engine = engine_factory()
    if request.param == "tcp":
        server = server_factory(engine)
        return SimulatorPort.tcp(*server.address, timeout=5.0), engine
    return SimulatorPort.in_process(engine), engine
