"""``make test`` on a fresh clone (no settings): PostgreSQL tests skip, they never error.

``.ci/run`` runs the quick loop once without ``ADAPTER_TEST_POSTGRES_URL``; this covers what that
run cannot see: a PostgreSQL parameter that lost its skip mark in any test, slow ones included,
skips at set-up (``tests/support/postgres.require_postgres``) instead of failing the newcomer's run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_postgres_parameter_without_its_skip_mark_skips_without_postgres() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ADAPTER_TEST_POSTGRES_URL"}
    probe = Path(__file__).with_name("probe_bare_postgres.py").relative_to(ROOT)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(probe)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 skipped" in run.stdout and "ADAPTER_TEST_POSTGRES_URL not set" in run.stdout, run.stdout
    assert "error" not in run.stdout.lower(), run.stdout
