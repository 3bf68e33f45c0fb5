"""``new-port NAME`` writes a package whose contract tests fail until the port is filled in, then pass.

Run as a user runs them: ``python -m adapter new-port`` and ``python -m pytest NAME`` in a folder of
their own; "filling in" here is a port over a SQLite database (the kit's SQL port), under the names
the skeleton gave (``make_port``, ``lose_commit_reply``).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from adapter.config import ConfigError
from adapter.entrypoints.scaffold import write_package
from tests.support.cli import run_adapter, run_module, without_adapter_settings

pytestmark = pytest.mark.slow  # subprocesses

FILLED_IN = '''
"""The shop's port: its SQLite database through the kit's SQL port."""

import os

from adapter.legacy.sql import SqlPort, lose_commit_reply
from adapter.legacy.sql import database_down as system_down


def make_port(settings):
    return SqlPort(os.environ["SHOP_URL"], descriptions={"customers": "Customers of the shop."})


__all__ = ["lose_commit_reply", "make_port", "system_down"]
'''


def _pytest(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_module("pytest", "-q", "-p", "no:cacheprovider", "shop", cwd=folder, env=env, timeout=180)


def test_the_scaffold_fails_until_filled_in_then_passes(tmp_path: Path) -> None:
    env = {**without_adapter_settings(), "SHOP_URL": f"sqlite:///{tmp_path / 'shop.db'}"}
    with sqlite3.connect(tmp_path / "shop.db") as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT)")

    wrote = run_adapter("new-port", "shop", cwd=tmp_path, env=env)
    assert wrote.returncode == 0, wrote.stderr
    skeleton = _pytest(tmp_path, env)

    (tmp_path / "shop" / "port.py").write_text(FILLED_IN)
    filled_in = _pytest(tmp_path, env)

    assert skeleton.returncode == 1, skeleton.stdout
    assert "9 failed, 1 passed" in skeleton.stdout  # only `protocols` holds for the skeleton
    assert "NotImplementedError" in skeleton.stdout
    assert filled_in.returncode == 0, filled_in.stdout + filled_in.stderr
    assert "10 passed" in filled_in.stdout


def test_the_next_line_of_new_port_is_a_command_that_passes_once_filled_in(tmp_path: Path) -> None:
    env = {**without_adapter_settings(), "SHOP_URL": f"sqlite:///{tmp_path / 'shop.db'}"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` is ours
    with sqlite3.connect(tmp_path / "shop.db") as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT)")
    wrote = run_adapter("new-port", "shop", cwd=tmp_path, env=env)
    [command] = [line.strip() for line in wrote.stdout.splitlines() if line.startswith("  python ")]
    (tmp_path / "shop" / "port.py").write_text(FILLED_IN)

    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )

    assert "next: fill in shop/port.py" in wrote.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10 passed" in done.stdout and "10 of 10 rules hold" in done.stdout


@pytest.mark.parametrize(
    ("name", "message"),
    [("Acme", "invalid port name 'Acme'"), ("class", "invalid port name 'class'"), ("erp", "exists already")],
)
def test_new_port_refuses_a_bad_name_or_an_existing_folder(tmp_path: Path, name: str, message: str) -> None:
    (tmp_path / "erp").mkdir()

    with pytest.raises(ConfigError, match=message):
        write_package(name, tmp_path)
