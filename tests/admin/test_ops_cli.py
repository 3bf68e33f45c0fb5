"""``python -m adapter ops ...`` as a subprocess against the test database (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapter.bootstrap import Kit
from adapter.domain.identity import Principal
from adapter.entrypoints.cli import main
from legacy_sim.engine import LegacyEngine

ROOT = Path(__file__).resolve().parents[2]
USER = "ops-tester"
pytestmark = pytest.mark.slow  # each test starts `python -m adapter ops` as a subprocess at least once


@pytest.fixture
def ops(kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run ``python -m adapter ops ARGS`` with the kit's settings in the environment.

    A subprocess by default; ``fast=True`` calls the same ``main`` in this process (same
    environment, same output), to keep the suite quick where a new process proves nothing more.
    """
    settings = kit.settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}
    env.update(
        {
            "ADAPTER_DATABASE_URL": settings.database_url,
            "ADAPTER_LEGACY_URL": settings.legacy_url,
            "ADAPTER_SECRET": settings.secret or "",
            "ADAPTER_SECRET_FILE": str(tmp_path / "cli.secret"),
            "LOGNAME": USER,
            "USER": USER,
            "PYTHONPATH": str(ROOT),
            "COLUMNS": "200",
        }
    )

    def run(
        *args: str, database_url: str | None = None, fast: bool = False
    ) -> subprocess.CompletedProcess[str]:
        call_env = dict(env)
        if database_url is not None:
            call_env["ADAPTER_DATABASE_URL"] = database_url
        if fast:
            with monkeypatch.context() as patch:
                for name in [k for k in os.environ if k.startswith("ADAPTER_")]:
                    patch.delenv(name)
                for name, value in call_env.items():
                    patch.setenv(name, value)
                capsys.readouterr()
                try:
                    code = main(["ops", *args])
                except SystemExit as exit_:  # argparse
                    code = int(exit_.code or 0)
                out, err = capsys.readouterr()
            return subprocess.CompletedProcess(list(args), code, out, err)
        return subprocess.run(
            [sys.executable, "-m", "adapter", "ops", *args],
            env=call_env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def make(kit: Kit, who: Principal, n: int = 2, *, commit: bool = False) -> tuple[str, Any]:
    handle = kit.service.begin(who, "customers").handle
    kit.service.add(who, handle, [{"n": i} for i in range(n)])
    return handle, (kit.service.commit(who, handle) if commit else None)


def test_ops_list_and_show(ops: Any, kit: Kit, alice: Principal, bob: Principal) -> None:
    make(kit, alice)
    handle, commit = make(kit, bob, commit=True)

    listed = ok_json(ops("list", "--json"))
    assert len(listed["items"]) == 5 and listed["next_cursor"] is None
    assert listed["items"][0]["operation_id"] == commit.operation_id, "newest first"
    [only] = ok_json(ops("list", "--kind", "commit", "--json", fast=True))["items"]
    assert (only["operation_id"], only["status"], only["principal"]) == (
        commit.operation_id,
        "succeeded",
        "bob",
    )
    paged = ok_json(ops("list", "--status", "succeeded", "--limit", "3", "--json", fast=True))
    assert len(paged["items"]) == 3 and paged["next_cursor"]
    rest = ok_json(
        ops(
            "list",
            "--status",
            "succeeded",
            "--limit",
            "3",
            "--cursor",
            paged["next_cursor"],
            "--json",
            fast=True,
        )
    )
    assert len(rest["items"]) == 2 and rest["next_cursor"] is None
    assert ok_json(ops("list", "--since", "2999-01-01T00:00:00", "--json", fast=True))["items"] == []

    table = ops("list", "--principal", "bob")
    assert table.returncode == 0, table.stderr
    assert commit.operation_id in table.stdout and "succeeded" in table.stdout
    assert "operations (3)" in table.stdout

    detail = ok_json(ops("show", commit.operation_id, "--json", fast=True))
    assert detail["operation"]["operation_id"] == commit.operation_id
    assert detail["import_record"]["status"] == "committed"
    assert detail["steps"] and detail["audit"] == []
    shown = ops("show", commit.operation_id)
    assert shown.returncode == 0, shown.stderr
    assert commit.operation_id in shown.stdout and "steps" in shown.stdout and "audit" in shown.stdout
    assert handle not in shown.stdout + json.dumps(detail)


def test_ops_reconcile_and_resolve_take_effect_and_are_audited(
    ops: Any, kit: Kit, legacy_engine: LegacyEngine, alice: Principal, bob: Principal
) -> None:
    handle, _ = make(kit, alice)
    legacy_engine.update_faults(drop_after_commit=1.0)
    unknown = kit.service.commit(alice, handle)
    legacy_engine.update_faults(drop_after_commit=0.0)
    assert unknown.status == "outcome_unknown"

    done = ops("reconcile", unknown.operation_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"reconcile {unknown.operation_id}: reconciled: committed (status now succeeded)"
    )
    detail = kit.admin.get_operation(unknown.operation_id)
    assert detail.operation.status == "succeeded"
    [entry] = detail.audit
    assert (entry.actor, entry.action, entry.outcome) == (f"cli:{USER}", "reconcile", "reconciled: committed")

    # A compensation that keeps failing stops at needs_operator; resolve it from the shell.
    bob_handle, _ = make(kit, bob, commit=True)
    legacy_engine.update_faults(error_rate=1.0)
    try:
        assert kit.service.abort(bob, bob_handle).status == "compensating"
    finally:
        legacy_engine.update_faults(error_rate=0.0)
    [stuck] = ok_json(ops("list", "--status", "needs_operator", "--json", fast=True))["items"]
    assert stuck["kind"] == "compensate"

    resolved = ok_json(ops("resolve", stuck["operation_id"], "--reason", "voided by hand", "--json"))
    assert (resolved["status"], resolved["outcome"]) == ("resolved", "resolved")
    detail = kit.admin.get_operation(stuck["operation_id"])
    assert detail.operation.status == "resolved"
    [entry] = detail.audit
    assert (entry.actor, entry.action, entry.reason) == (f"cli:{USER}", "resolve", "voided by hand")


def test_ops_compensate_twice_voids_once(
    ops: Any, kit: Kit, legacy_engine: LegacyEngine, bob: Principal
) -> None:
    _, commit = make(kit, bob, commit=True)
    first = ok_json(ops("compensate", commit.operation_id, "--reason", "wrong file", "--json"))
    second = ok_json(ops("compensate", commit.operation_id, "--json", fast=True))
    assert first["outcome"] == second["outcome"] == "import compensated"
    [batch] = legacy_engine.committed_batches()
    assert batch["voided"] is True
    detail = kit.admin.get_operation(commit.operation_id)
    assert detail.compensation is not None and detail.compensation["attempts"] == 1
    assert [(a.actor, a.reason) for a in detail.audit] == [
        (f"cli:{USER}", "wrong file"),
        (f"cli:{USER}", None),
    ]


def test_ops_errors_are_one_line_on_stderr_and_a_non_zero_exit(
    ops: Any, kit: Kit, bob: Principal, tmp_path: Path
) -> None:
    _, commit = make(kit, bob, commit=True)

    missing = ops("show", "no-such-operation")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.strip().splitlines() == [
        "adapter ops: operation_not_found: no operation with this id or idempotency key"
    ]
    refused = ops("resolve", commit.operation_id, "--reason", "not stuck", fast=True)
    assert refused.returncode == 1
    assert len(refused.stderr.strip().splitlines()) == 1 and "invalid_state" in refused.stderr
    assert kit.admin.get_operation(commit.operation_id).audit[-1].outcome == "refused: InvalidState"

    assert ops("resolve", commit.operation_id, fast=True).returncode == 2  # --reason is required
    assert ops("list", "--limit", "0", fast=True).returncode == 2
    assert ops("list", "--since", "yesterday", fast=True).returncode == 2

    unreachable = ops("list", database_url=f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    assert unreachable.returncode == 3
    assert len(unreachable.stderr.strip().splitlines()) == 1, unreachable.stderr
    assert unreachable.stderr.startswith("adapter ops: database_unavailable: ")
