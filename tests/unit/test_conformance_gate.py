"""``conformance/run.py`` decides the exit code; the ``tasks-*`` scenarios gate by named checks.

The harness's own checks.json files are the input, written here as the harness writes them, so
what is proven is the decision, not the suite (``make conformance`` runs the suite).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

RUN_PY = Path(__file__).resolve().parents[2] / "conformance" / "run.py"


@pytest.fixture(scope="module")
def run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_run", RUN_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def write(output: Path, scenario: str, checks: list[tuple[str, str]]) -> None:
    folder = output / f"server-{scenario}-2026-12-01T21-37-28-049Z"
    folder.mkdir(parents=True)
    body = [
        {"id": check_id, "status": status, "errorMessage": f"{check_id} said so"}
        for check_id, status in checks
    ]
    (folder / "checks.json").write_text(json.dumps(body))


def passing_tasks_run(run: ModuleType, output: Path) -> None:
    """Every required check a SUCCESS, every fixture-bound one (``slow_compute`` ...) a FAILURE."""
    for name, ids in run.REQUIRED_CHECKS.items():
        write(output, name, [(check_id, "SUCCESS") for check_id in ids] + [("needs-slow-compute", "FAILURE")])


def test_fixture_bound_task_checks_fail_nothing_and_a_failing_named_check_fails_the_run(
    run: ModuleType, tmp_path: Path
) -> None:
    passing_tasks_run(run, tmp_path / "ok")
    broken = tmp_path / "broken"
    passing_tasks_run(run, broken)
    path = next(broken.glob("server-tasks-dispatch-and-envelope-*")) / "checks.json"
    path.write_text(
        path.read_text().replace(
            '"tasks-removed-tasks-list", "status": "SUCCESS"',
            '"tasks-removed-tasks-list", "status": "FAILURE"',
        )
    )

    ok, _ = run.decide(run.load_results(tmp_path / "ok"), (), run.REQUIRED_CHECKS)
    problems, _ = run.decide(run.load_results(broken), (), run.REQUIRED_CHECKS)

    assert ok == []
    assert problems == [
        "tasks-dispatch-and-envelope: tasks-removed-tasks-list: tasks-removed-tasks-list said so"
    ]


def test_a_named_task_check_or_scenario_that_did_not_run_fails_the_run(
    run: ModuleType, tmp_path: Path
) -> None:
    passing_tasks_run(run, tmp_path)
    for folder in tmp_path.glob("server-tasks-lifecycle-*"):
        (folder / "checks.json").unlink()
    path = next(tmp_path.glob("server-tasks-request-headers-*")) / "checks.json"
    path.write_text(json.dumps([{"id": "wire-schema-valid", "status": "SUCCESS"}]))

    problems, _ = run.decide(run.load_results(tmp_path), (), run.REQUIRED_CHECKS)

    assert sorted(problems) == [
        "tasks-lifecycle: did not run (no checks.json)",
        "tasks-request-headers: tasks-headers-reject-mismatched-method: did not run",
    ]
