"""``python -m adapter serve --workers N``: what it refuses, and that the workers it starts serve."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from adapter.store.migrate import upgrade

SECRET = "w" * 40
LINUX_ONLY = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the supervisor's own sockets: Linux"
)


def serve(tmp_path: Path, port: int, **env: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}
    return subprocess.Popen(
        [sys.executable, "-m", "adapter", "serve", "--workers", "2", "--port", str(port)],
        cwd=tmp_path,
        env={**clean, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the supervisor and its workers form one group, stopped together
    )


def refusal(tmp_path: Path, **env: str) -> str:
    process = serve(tmp_path, 0, **env)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1, out  # one clear line, no traceback
    return lines[0]


def test_several_workers_refuse_without_a_shared_secret(tmp_path: Path) -> None:
    line = refusal(tmp_path, ADAPTER_DATABASE_URL="postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert "ADAPTER_SECRET" in line
    assert not (tmp_path / "adapter.secret").exists()  # no key file that another host would not share


def test_several_workers_refuse_sqlite(tmp_path: Path) -> None:
    line = refusal(tmp_path, ADAPTER_SECRET=SECRET, ADAPTER_DATABASE_URL=f"sqlite:///{tmp_path / 'a.db'}")
    assert "PostgreSQL" in line
    assert not (tmp_path / "a.db").exists()


@pytest.mark.postgres
def test_several_workers_refuse_an_unmigrated_database(postgres_schema_url: str, tmp_path: Path) -> None:
    line = refusal(tmp_path, ADAPTER_SECRET=SECRET, ADAPTER_DATABASE_URL=postgres_schema_url)
    assert "python -m adapter migrate" in line


@pytest.mark.postgres
@LINUX_ONLY
def test_several_workers_refuse_a_port_already_taken(postgres_schema_url: str, tmp_path: Path) -> None:
    upgrade(postgres_schema_url)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = serve(
            tmp_path,
            port,
            ADAPTER_SECRET=SECRET,
            ADAPTER_DATABASE_URL=postgres_schema_url,
            ADAPTER_LEGACY_DB=str(tmp_path / "legacy.db"),
        )
        out, _ = process.communicate(timeout=60)
    assert process.returncode == 2, out
    assert out.strip().splitlines() == [f"adapter: cannot listen on 127.0.0.1:{port}: Address already in use"]


@pytest.fixture
def two_workers(postgres_schema_url: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``serve --workers 2`` on a migrated schema: the supervisor and its port; stopped after."""
    upgrade(postgres_schema_url)
    port = 20000 + secrets.randbelow(20000)
    process = serve(
        tmp_path,
        port,
        ADAPTER_SECRET=SECRET,
        ADAPTER_DATABASE_URL=postgres_schema_url,
        ADAPTER_LEGACY_DB=str(tmp_path / "legacy.db"),
    )
    try:
        yield process, port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def _ready_workers(process: subprocess.Popen[str], count: int) -> list[str]:
    """The next ``count`` "adapter: worker <id> (pid <pid>) ready" lines the supervisor passes on."""
    deadline = time.monotonic() + 90
    lines: list[str] = []
    while time.monotonic() < deadline and len(lines) < count:
        line = process.stdout.readline() if process.stdout else ""
        if not line and process.poll() is not None:
            pytest.fail("the supervisor exited")
        if line.startswith("adapter: worker ") and "ready" in line:
            lines.append(line)
    assert len(lines) == count
    return lines


def _pid(ready_line: str) -> int:
    return int(ready_line.split("(pid ")[1].split(")")[0])


@pytest.mark.slow
@pytest.mark.postgres
def test_two_workers_serve_one_port_each_with_its_own_id(
    two_workers: tuple[subprocess.Popen[str], int],
) -> None:
    process, port = two_workers
    ready = set()
    for line in _ready_workers(process, 2):
        worker_id = line.split()[2]  # host:pid:random, built in the worker after it started
        assert worker_id.startswith(f"{os.uname().nodename}:")
        assert int(worker_id.split(":")[1]) == _pid(line) != process.pid  # not the supervisor
        ready.add(worker_id)
    assert len(ready) == 2
    assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).json()["status"] == "ready"


def _established_on(pid: int, port: int) -> int:
    """How many ESTABLISHED TCP connections to local ``port`` the process ``pid`` holds (Linux)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
                count += 1
    return count


@pytest.mark.slow
@pytest.mark.postgres
@LINUX_ONLY
def test_connections_opened_at_once_are_spread_over_both_workers(
    two_workers: tuple[subprocess.Popen[str], int],
) -> None:
    """With one shared socket the first worker to wake took all 32 and kept them (keep-alive)."""
    process, port = two_workers
    pids = [_pid(line) for line in _ready_workers(process, 2)]

    async def connect_all() -> dict[int, int]:
        clients = [httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") for _ in range(32)]
        try:
            answers = await asyncio.gather(*(client.get("/healthz") for client in clients))
            assert all(answer.status_code == 200 for answer in answers)
            return {pid: _established_on(pid, port) for pid in pids}  # the clients are still open
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))

    held = asyncio.run(connect_all())
    assert sum(held.values()) == 32, held
    # The kernel hashes each connection to a socket: fewer than 4 of 32 on one is a 1 in 400,000 chance.
    assert all(count >= 4 for count in held.values()), held


@pytest.mark.slow
@pytest.mark.postgres
@LINUX_ONLY
def test_a_worker_that_dies_is_replaced_and_sigterm_stops_them_all(
    two_workers: tuple[subprocess.Popen[str], int],
) -> None:
    process, port = two_workers
    first, second = (_pid(line) for line in _ready_workers(process, 2))
    os.kill(first, signal.SIGKILL)
    [replacement] = (_pid(line) for line in _ready_workers(process, 1))
    assert replacement not in (first, second)
    assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    process.send_signal(signal.SIGTERM)  # the supervisor alone: it stops its workers
    assert process.wait(timeout=60) == 0
    for pid in (second, replacement):
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
