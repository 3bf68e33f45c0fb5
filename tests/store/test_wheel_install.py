"""A wheel install migrates its database: the migrations ship inside the package.

``pip install .`` into a fresh venv (no dependencies; the dev venv's site-packages are added after the
install through a ``.pth`` file, so nothing is downloaded but the build backend), then
``python -m adapter migrate`` from a directory that is not the source tree; and the installed
``legacy-adapter`` command (``migrate``, ``serve``, ``check-port``, ``new-port``) in a user's folder,
with their port module found there.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import text

from tests.support.postgres import postgres_schema, require_postgres
from tests.support.servers import free_port, stop_process
from tests.support.wait import wait_until

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{command[:4]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _source_copy(target: Path) -> Path:
    """The project as a fresh checkout would have it: a build leaves nothing in (or from) the worktree."""
    skip = shutil.ignore_patterns(".*", "build", "*.egg-info", "__pycache__", "node_modules", "*.db*")
    shutil.copytree(REPO, target, ignore=skip)
    return target


def _installed_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh venv with the project installed from a source copy; returns (python, site-packages).

    Dependencies come from the dev venv, added only after the install so pip never sees its
    editable install."""
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    source = _source_copy(tmp_path / "source")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", source, cwd=tmp_path)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run(python, "-c", purelib, cwd=tmp_path).strip())
    (site / "dev_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, site


def test_an_installed_wheel_migrates_a_database_from_any_directory(tmp_path: Path) -> None:
    python, site = _installed_venv(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ADAPTER_"))}
    env["ADAPTER_DATABASE_URL"] = f"sqlite:///{elsewhere / 'adapter.db'}"

    where = "import adapter.store.migrate as m; print(m.MIGRATIONS)"
    location = _run(python, "-c", where, cwd=elsewhere, env=env)
    view = "from adapter.entrypoints.mcp.apps import render_view; print(len(render_view({'tools': {}})))"
    rendered = _run(python, "-c", view, cwd=elsewhere, env=env)  # the view's files, from the install
    output = _run(python, "-m", "adapter", "migrate", cwd=elsewhere, env=env)

    assert Path(location.strip()).is_relative_to(site)  # the installed copy, not the source tree
    assert int(rendered) > 100_000  # the HTML with its style and bundled script inlined
    assert "database migrated to head" in output
    with sqlite3.connect(elsewhere / "adapter.db") as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        (version,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    assert {"imports", "operations", "events", "audit_records"} <= tables
    heads = sorted(p.name.split("_")[0] for p in (REPO / "migrations/versions").glob("0*.py"))
    assert version == heads[-1]


def test_the_sdist_carries_what_the_docs_tell_users_to_copy(tmp_path: Path) -> None:
    """The tutorial copies files out of the kit's source (``/path/to/legacy-mcp-adapter/...``): a
    source distribution holds each of them, and a wheel built from it still ships the migrations."""
    source = _source_copy(tmp_path / "source")
    build = "from setuptools import build_meta; print(build_meta.build_sdist('dist'))"
    sdist = source / "dist" / _run(sys.executable, "-c", build, cwd=source).strip().splitlines()[-1]
    with tarfile.open(sdist) as archive:
        root = archive.getnames()[0].split("/")[0]
        members = {name.removeprefix(root + "/") for name in archive.getnames()}
        archive.extractall(tmp_path / "unpacked", filter="data")
    tutorial = (REPO / "docs" / "wrap-your-own-system.md").read_text()
    copied = set(re.findall(r"/path/to/legacy-mcp-adapter/([\w/.-]+)", tutorial))
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        tmp_path / "unpacked" / root,
        "-w",
        tmp_path,
        cwd=tmp_path,
    )
    [wheel] = tmp_path.glob("*.whl")
    shipped = zipfile.ZipFile(wheel).namelist()

    assert copied >= {"examples/acme_erp/port.py", "examples"}
    missing = [
        path for path in copied if path not in members and not any(m.startswith(path + "/") for m in members)
    ]
    assert missing == []
    assert {
        "examples/acme_erp/fake_server.py",
        "examples/acme_erp/test_acme_erp.py",
        "migrations/env.py",
    } <= members
    views = {f"adapter/entrypoints/mcp/views/review.{ext}" for ext in ("html", "css", "js")}
    assert views <= set(shipped)  # the MCP Apps view is package data (adapter/entrypoints/mcp/apps.py)
    versions = sorted(p.name for p in (REPO / "migrations" / "versions").glob("0*.py"))
    assert [n for n in shipped if n.startswith("adapter/store/migrations/versions/0")] == [
        f"adapter/store/migrations/versions/{name}" for name in versions
    ]


USER_PORT = """
import os

from adapter.legacy.sql import SqlPort


def make(settings):
    return SqlPort(os.environ["SHOP_URL"])
"""


def _users_folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A user's folder holding their port module and their shop database, and an environment with
    nothing of ours in it (no PYTHON*, no ADAPTER_*) but the shop's URL."""
    folder = tmp_path / "wrap-shop"
    folder.mkdir()
    (folder / "shop_port.py").write_text(USER_PORT)
    with sqlite3.connect(folder / "shop.db") as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ADAPTER_"))}
    env["SHOP_URL"] = f"sqlite:///{folder / 'shop.db'}"
    return folder, env


def test_the_installed_command_checks_and_scaffolds_a_users_port_from_its_folder(tmp_path: Path) -> None:
    """``legacy-adapter`` (the console script) finds a port module in the folder it runs in."""
    python, _ = _installed_venv(tmp_path)
    folder, env = _users_folder(tmp_path)
    command = python.parent / "legacy-adapter"  # the console script beside the venv's python

    checked = _run(
        command,
        "check-port",
        "shop_port:make",
        "--lose-commit-reply",
        "adapter.legacy.sql:lose_commit_reply",
        "--system-down",
        "adapter.legacy.sql:database_down",
        cwd=folder,
        env=env,
    )
    scaffolded = _run(command, "new-port", "acme_erp", cwd=folder, env=env)

    assert "10 of 10 rules hold" in checked
    assert "wrote acme_erp/" in scaffolded
    assert {p.name for p in (folder / "acme_erp").iterdir()} >= {"__init__.py", "port.py", "test_port.py"}


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=5).json()["status"] == "ready"
    except (httpx.TransportError, ValueError):
        return False  # not listening yet


@pytest.mark.anyio
async def test_the_installed_command_migrates_and_serves_a_users_port_from_its_folder(tmp_path: Path) -> None:
    """``legacy-adapter migrate`` and ``serve`` with ADAPTER_LEGACY_PORT naming a module in the folder."""
    python, _ = _installed_venv(tmp_path)
    folder, env = _users_folder(tmp_path)
    env["ADAPTER_LEGACY_PORT"] = "shop_port:make"
    env["ADAPTER_SECRET"] = "s" * 40
    command = python.parent / "legacy-adapter"
    extras = "import importlib.metadata as m; print(m.requires('legacy-mcp-adapter'))"

    migrated = _run(command, "migrate", cwd=folder, env=env)
    port = free_port()
    serving = subprocess.Popen(
        [command, "serve", "--port", str(port)], cwd=folder, env=env, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: serving.poll() is not None or _ready(url), timeout=60, what="serve to be ready")
        assert serving.poll() is None, serving.stderr.read().decode() if serving.stderr else ""
        async with Client(streamable_http_client(url + "/mcp"), cache=None) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    finally:
        stop_process(serving)

    assert "database migrated to head" in migrated
    assert tools["begin_import"].input_schema["properties"]["target"]["enum"] == ["customers"]
    assert 'pytest<10,>=8; extra == "testing"' in _run(python, "-c", extras, cwd=folder, env=env)


def _sql_section(doc: str) -> str:
    start = doc.index("## A legacy SQL database")
    return doc[start : doc.index("\n## ", start + 1)]


ORDINARY_SCHEMA = [
    """CREATE TABLE customers (id SERIAL PRIMARY KEY, name VARCHAR(100) NOT NULL, email TEXT,
       balance NUMERIC(10, 2) NOT NULL DEFAULT 0, born DATE, visits SMALLINT, since TIMESTAMPTZ)""",
    """CREATE TABLE orders (id SERIAL PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers (id),
       amount NUMERIC(10, 2) NOT NULL, due DATE NOT NULL, placed TIMESTAMP, note VARCHAR(200))""",
    "INSERT INTO customers (name) VALUES ('first customer'), ('second customer')",  # ids 1 and 2
]


@pytest.mark.postgres
def test_following_the_sql_tutorial_from_the_wheel_on_postgres_every_rule_holds(tmp_path: Path) -> None:
    """Done when: a user who follows the SQL section of docs/wrap-your-own-system.md from the
    installed wheel, on an ordinary PostgreSQL schema with numeric, date and foreign-key columns,
    gets every rule of check-port, for the table others refer to and for the one with the foreign
    key (its sample records as the tutorial writes them), and from pytest as the tutorial writes it.
    """
    require_postgres()  # skips before the install where PostgreSQL is not configured
    python, _ = _installed_venv(tmp_path)
    section = _sql_section((REPO / "docs" / "wrap-your-own-system.md").read_text())
    commands = [
        line for line in section.splitlines() if line.startswith(("echo '", "legacy-adapter check-port"))
    ]
    start = section.index("```python\n") + len("```python\n")
    (folder := tmp_path / "wrap-erp").mkdir()
    (folder / "test_orders.py").write_text(section[start : section.index("```\n", start)])
    with postgres_schema("wrap") as (engine, schema):
        with engine.begin() as conn:
            conn.execute(text(f'SET LOCAL search_path TO "{schema}"'))
            for statement in ORDINARY_SCHEMA:
                conn.execute(text(statement))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ADAPTER_"))}
        env.update(
            PATH=f"{python.parent}{os.pathsep}{env['PATH']}",  # the venv's legacy-adapter and python
            ADAPTER_SQL_URL=require_postgres(),
            ADAPTER_SQL_SCHEMA_NAME=schema,
            ADAPTER_SQL_TABLES="customers,orders",
        )
        checked = [_run("bash", "-c", command, cwd=folder, env=env) for command in commands]
        tested = _run(
            python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_orders.py", cwd=folder, env=env
        )

    assert len(commands) == 3, commands  # the default target, the samples file, the foreign-key table
    reports = [out for out in checked if "port contract:" in out]
    assert [r.splitlines()[0] for r in reports] == [
        "port contract: adapter.legacy.sql:from_settings (target 'customers')",
        "port contract: adapter.legacy.sql:from_settings (target 'orders')",
    ]
    assert all("10 of 10 rules hold" in r and "FAIL" not in r and "SKIP" not in r for r in reports), reports
    assert "10 passed" in tested
