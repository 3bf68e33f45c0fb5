"""``python -m adapter check-port`` passes for the SQL port (SQLite, PostgreSQL) and the Acme ERP example."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_adapter, without_adapter_settings
from tests.support.servers import serve_in_thread

pytestmark = pytest.mark.slow  # subprocesses

REPO = Path(__file__).resolve().parents[2]


def _check_port(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_adapter("check-port", *args, cwd=cwd, env={**without_adapter_settings(), **env}, timeout=180)


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
    with serve_in_thread(create_app(token)) as url:
        yield url, token


def test_the_acme_erp_example_passes_check_port(fake_erp: tuple[str, str]) -> None:
    url, token = fake_erp
    done = _check_port(
        REPO / "examples",  # the user's folder: acme_erp/ is found from the current directory
        {"ACME_ERP_URL": url, "ACME_ERP_TOKEN": token},
        "acme_erp.port:make_port",
        "--lose-commit-reply",
        "acme_erp.port:lose_commit_reply",
    )
    _all_hold(done)


def test_a_factory_that_needs_settings_says_which_one(tmp_path: Path) -> None:
    done = _check_port(tmp_path, {}, "adapter.legacy.sql:from_settings")

    assert done.returncode == 2
    assert done.stderr.strip() == "adapter: invalid setting ADAPTER_SQL_URL: Field required"
