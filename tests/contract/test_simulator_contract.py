"""The simulator port passes the port contract kit, over TCP and in-process, from pytest and the CLI."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter.legacy import simulator
from adapter.legacy.simulator import SimulatorPort
from adapter.testing import PortContract, RuleResult
from adapter.testing.contract import ContractSubject, run_contract
from legacy_sim.engine import LegacyEngine
from tests.support.cli import run_adapter

REPO = Path(__file__).resolve().parents[2]


class TestSimulatorOverTcp(PortContract):
    @pytest.fixture
    def port(self, legacy_port: SimulatorPort) -> SimulatorPort:
        return legacy_port

    @pytest.fixture
    def lose_commit_reply(self):  # type: ignore[no-untyped-def]
        return simulator.lose_commit_reply

    @pytest.fixture
    def system_down(self):  # type: ignore[no-untyped-def]
        return simulator.system_down


class TestSimulatorInProcess(PortContract):
    @pytest.fixture
    def port(self, tmp_path: Path) -> Iterator[SimulatorPort]:
        port = SimulatorPort.from_url("embedded", embedded_db_path=tmp_path / "legacy.db")
        yield port
        port.close()

    @pytest.fixture
    def lose_commit_reply(self):  # type: ignore[no-untyped-def]
        return simulator.lose_commit_reply

    @pytest.fixture
    def system_down(self):  # type: ignore[no-untyped-def]
        return simulator.system_down


class _ForgetsVoids:
    """A port that breaks one rule: a repeated VOID does not say already_voided."""

    def __init__(self, inner: SimulatorPort) -> None:
        self.inner = inner

    def open_session(self):  # type: ignore[no-untyped-def]
        return self.inner.open_session()

    def batch_status(self, batch_ref: str):  # type: ignore[no-untyped-def]
        return self.inner.batch_status(batch_ref)

    def void_batch(self, legacy_batch_id: str):  # type: ignore[no-untyped-def]
        result = self.inner.void_batch(legacy_batch_id)
        return type(result)(result.legacy_batch_id, already_voided=False)


def test_a_broken_rule_fails_and_names_what_it_saw(legacy_engine: LegacyEngine) -> None:
    inner = SimulatorPort.in_process(legacy_engine)
    results = {r.rule: r for r in run_contract(ContractSubject(_ForgetsVoids(inner)))}

    assert results["void_is_idempotent"].status == "fail"
    assert "repeated void" in results["void_is_idempotent"].detail
    assert results["session_commits"].status == "pass"
    assert results["lost_commit_reply_is_unknown"] == RuleResult(
        "lost_commit_reply_is_unknown",
        results["lost_commit_reply_is_unknown"].description,
        "skip",
        "no fault hook given (check-port --lose-commit-reply MODULE:HOOK)",
        results["lost_commit_reply_is_unknown"].seconds,
    )


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ADAPTER_LEGACY_URL": "embedded",
        "ADAPTER_LEGACY_DB": str(tmp_path / "legacy.db"),
        "ADAPTER_SECRET_FILE": str(tmp_path / "adapter.secret"),
    }
    return run_adapter(*args, cwd=tmp_path, env=env)


@pytest.mark.slow
def test_check_port_reports_every_rule_and_exits_0_when_all_hold(tmp_path: Path) -> None:
    done = _cli(
        tmp_path,
        "check-port",
        "adapter.legacy.simulator:from_settings",
        "--lose-commit-reply",
        "adapter.legacy.simulator:lose_commit_reply",
        "--system-down",
        "adapter.legacy.simulator:system_down",
    )

    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "SKIP")]
    assert len(lines) == 10 and all(line.startswith("PASS") for line in lines), done.stdout
    assert "10 of 10 rules hold" in done.stdout


@pytest.mark.slow
def test_check_port_without_a_fault_hook_does_not_claim_every_rule(tmp_path: Path) -> None:
    done = _cli(tmp_path, "check-port", "adapter.legacy.simulator:from_settings")

    assert done.returncode == 1
    assert "SKIP  lost_commit_reply_is_unknown" in done.stdout
    assert "SKIP  outage_raises_transient" in done.stdout
    assert "8 of 10 rules hold" in done.stdout
