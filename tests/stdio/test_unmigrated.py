"""``serve`` and ``stdio`` refuse a database that is not migrated to head with one line that says to
run ``python -m adapter migrate`` (as ``serve --workers 2`` does), instead of serving errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.store.migrate import downgrade, upgrade
from tests.support.cli import run_adapter, without_adapter_settings
from tests.support.servers import free_port

pytestmark = pytest.mark.slow  # subprocesses

COMMANDS = {"serve": ["serve", "--port", str(free_port())], "stdio": ["stdio"]}


def _refusal(tmp_path: Path, command: str, url: str) -> str:
    env = {**without_adapter_settings(), "ADAPTER_DATABASE_URL": url, "ADAPTER_SECRET": "s" * 40}
    done = run_adapter(*COMMANDS[command], cwd=tmp_path, env=env, stdin="", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()  # one line, no banner, no traceback
    return line


@pytest.mark.parametrize("command", ["serve", "stdio"])
def test_a_database_never_migrated_is_refused_with_what_to_run(tmp_path: Path, command: str) -> None:
    line = _refusal(tmp_path, command, f"sqlite:///{tmp_path / 'adapter.db'}")

    assert line.startswith("adapter: the database is at revision none, not 00")
    assert line.endswith("run `python -m adapter migrate` once before serving")
    assert not (tmp_path / "adapter.db").exists()  # nothing created: migrate creates it owner-only


@pytest.mark.parametrize("command", ["serve", "stdio"])
def test_a_database_behind_the_code_is_refused(db_url: str, tmp_path: Path, command: str) -> None:
    upgrade(db_url)
    downgrade(db_url, "-1")

    line = _refusal(tmp_path, command, db_url)

    assert "run `python -m adapter migrate`" in line and "revision none" not in line


def test_an_empty_database_is_refused_on_each_database(db_url: str, tmp_path: Path) -> None:
    assert "revision none" in _refusal(tmp_path, "serve", db_url)
