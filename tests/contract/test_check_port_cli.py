"""``python -m adapter check-port`` passes for the SQL port (SQLite, PostgreSQL) and the Acme ERP example."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

pytestmark = pytest.mark.slow  # subprocesses

REPO = Path(__file__).resolve().parents[2]


def _check_port(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}
    return subprocess.run(
        [sys.executable, "-m", "adapter", "check-port", *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def _all_hold(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "9 of 9 rules hold" in done.stdout
    assert "FAIL" not in done.stdout and "SKIP" not in done.stdout


def test_the_sql_port_passes_check_port(legacy_db: Any, tmp_path: Path) -> None:
    env = {"ADAPTER_SQL_URL": legacy_db.url}
    if legacy_db.schema:
        env["ADAPTER_SQL_SCHEMA_NAME"] = legacy_db.schema
    done = _check_port(
        tmp_path,
        env,
        "adapter.legacy.sql:from_settings",
        "--lose-commit-reply",
        "adapter.legacy.sql:lose_commit_reply",
    )
    _all_hold(done)
    assert "(target 'customers')" in done.stdout


@pytest.fixture
def fake_erp() -> Iterator[tuple[str, str]]:
    sys.path.insert(0, str(REPO / "examples"))
    from acme_erp.fake_server import create_app

    token = secrets.token_hex(8)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(token), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", token
    server.should_exit = True
    thread.join(timeout=10)


def test_the_acme_erp_example_passes_check_port(fake_erp: tuple[str, str]) -> None:
    url, token = fake_erp
    done = _check_port(
        REPO / "examples",  # the user's folder: acme_erp/ is found from the current directory
        {"ACME_ERP_URL": url, "ACME_ERP_TOKEN": token},
        "acme_erp.port:from_settings",
        "--lose-commit-reply",
        "acme_erp.port:lose_commit_reply",
    )
    _all_hold(done)


def test_a_factory_that_needs_settings_says_which_one(tmp_path: Path) -> None:
    done = _check_port(tmp_path, {}, "adapter.legacy.sql:from_settings")

    assert done.returncode == 2
    assert done.stderr.strip() == "adapter: invalid setting ADAPTER_SQL_URL: Field required"
