"""``check-port`` as a user runs it, against a system of the tests' own (the warehouse: a separate
process, one batch per connection, a COMMIT that is not idempotent): the port written for it passes
every rule; each deliberately broken port fails, with the rule it breaks (``tests/support/warehouse``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_adapter, without_adapter_settings
from tests.support.servers import stop_process

pytestmark = pytest.mark.slow  # a server process and a check-port process per port

REPO = Path(__file__).resolve().parents[2]
HOOKS = (
    "--lose-commit-reply",
    "tests.support.warehouse.port:lose_commit_reply",
    "--system-down",
    "tests.support.warehouse.port:system_down",
)


@pytest.fixture
def warehouse() -> Iterator[str]:
    """The warehouse server in a process of its own; its address, ``host:port``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.warehouse.server"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    try:
        yield f"127.0.0.1:{line.split()[-1]}"
    finally:
        stop_process(process)


def _check(warehouse: str, factory: str) -> tuple[int, set[str], str]:
    """Run check-port from the repository (where ``tests.support.warehouse`` is found); return its
    exit status, the rules it reported FAIL and its output."""
    env = {**without_adapter_settings(), "WAREHOUSE_ADDRESS": warehouse}
    done = run_adapter("check-port", factory, *HOOKS, cwd=REPO, env=env, timeout=300)
    failed = set(re.findall(r"^FAIL  (\w+)", done.stdout, re.MULTILINE))
    return done.returncode, failed, done.stdout + done.stderr


def test_the_port_written_for_the_warehouse_keeps_every_rule(warehouse: str) -> None:
    status, failed, output = _check(warehouse, "tests.support.warehouse.port:make_port")

    assert (status, failed) == (0, set()), output
    assert "10 of 10 rules hold" in output


ALONE = {"retries_commit", "hides_outage", "slow_status", "void_not_idempotent"}
"""Ports whose lie no other rule sees: only their rule fails. (A port that loses its batches, say,
breaks every rule that looks for one.)"""


@pytest.mark.parametrize(
    ("factory", "breaks", "saw"),
    [
        ("not_findable", "session_commits", "batch_status after one commit listed []"),
        ("double_commit", "session_commits", "batch_status after one commit listed [("),
        ("retries_commit", "lost_commit_reply_is_unknown", "lost COMMIT reply batch_status listed [("),
        ("stale_status", "session_rolls_back", "reusing the reference listed []"),
        ("hides_outage", "outage_raises_transient", "batch_status answered [] while the system was down"),
        ("wrong_count", "session_commits", "commit() reported 2 records, 5 were added"),
        # which refusal the shared connection gives depends on how the six threads interleave:
        # a second BEGIN on the open batch, or a COMMIT after another session's close rolled it back
        ("shared_connection", "concurrent_sessions", ("batch_open", "no_batch")),
        ("slow_status", "readiness_is_fast", "batch_status('readiness-probe') took"),
        ("void_not_idempotent", "void_is_idempotent", "already_voided"),
    ],
)
def test_a_broken_port_fails_the_rule_it_breaks(
    warehouse: str, factory: str, breaks: str, saw: str | tuple[str, ...]
) -> None:
    status, failed, output = _check(warehouse, f"tests.support.warehouse.broken:{factory}")

    assert status == 1, output
    assert breaks in failed, output
    if factory in ALONE:
        assert failed == {breaks}, output
    detail = output.split(f"FAIL  {breaks}", 1)[1].split("\n", 2)[1]
    assert any(seen in detail for seen in ((saw,) if isinstance(saw, str) else saw)), output
