"""The Python client example of docs/wrap-your-own-system.md runs as written against ``serve``: it
begins an import, adds records and answers ``commit_import``'s confirmation question, and the rows
land in the wrapped database."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.support.cli import run_adapter, without_adapter_settings
from tests.support.servers import free_port, stop_process
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow  # a server process

DOC = Path(__file__).resolve().parents[2] / "docs" / "wrap-your-own-system.md"
MARKER = '"""Import two customers through the served kit, answering the commit\'s confirmation question."""'


def _example() -> str:
    doc = DOC.read_text()
    start = doc.index("```python\n" + MARKER) + len("```python\n")
    return doc[start : doc.index("```\n", start)]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """``serve`` on the SQL port over a shop database, as the docs set it up; (port, shop URL)."""
    shop = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = create_engine(shop)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(50) NOT NULL)"))
    engine.dispose()
    env = {
        **without_adapter_settings(),
        "ADAPTER_LEGACY_PORT": "adapter.legacy.sql:from_settings",
        "ADAPTER_SQL_URL": shop,
        "ADAPTER_DATABASE_URL": f"sqlite:///{tmp_path / 'adapter.db'}",
        "ADAPTER_SECRET": "s" * 40,
    }
    assert run_adapter("migrate", cwd=tmp_path, env=env).returncode == 0
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "adapter", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _ready(port), timeout=60, what="serve to be ready")
        yield port, shop
    finally:
        stop_process(process)


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_the_python_client_example_answers_the_confirmation_and_commits(
    served: tuple[int, str], tmp_path: Path
) -> None:
    port, shop = served
    example = _example().replace("127.0.0.1:3000", f"127.0.0.1:{port}")
    (tmp_path / "client.py").write_text(example)

    done = subprocess.run(
        [sys.executable, "client.py"],
        cwd=tmp_path,
        env={**os.environ},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    asked, result = done.stdout.splitlines()
    assert asked.startswith("asked: ") and "2 staged records" in asked
    assert result.startswith("committed sql-")
    engine = create_engine(shop)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT name FROM customers ORDER BY id")).scalars().all() == [
            "Ada",
            "Grace",
        ]
    engine.dispose()
