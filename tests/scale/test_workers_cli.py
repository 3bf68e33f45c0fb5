"""``python -m adapter serve --workers N``: what it refuses, and that the workers it starts serve."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from adapter.store.migrate import upgrade

SECRET = "w" * 40


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


@pytest.mark.slow
@pytest.mark.postgres
def test_two_workers_serve_one_port_each_with_its_own_id(postgres_schema_url: str, tmp_path: Path) -> None:
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
        deadline = time.monotonic() + 90
        ready: set[str] = set()
        while time.monotonic() < deadline and len(ready) < 2:
            line = process.stdout.readline() if process.stdout else ""
            if not line and process.poll() is not None:
                pytest.fail("the supervisor exited")
            if line.startswith("adapter: worker ") and "ready" in line:
                worker_id = line.split()[2]  # host:pid:random, built in the worker after it started
                assert worker_id.startswith(f"{os.uname().nodename}:")
                pid = worker_id.split(":")[1]
                assert f"(pid {pid})" in line and int(pid) != process.pid  # not the supervisor
                ready.add(worker_id)
        assert len(ready) == 2
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).json()["status"] == "ready"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
