"""Crash test: a real kit process is SIGKILLed in the middle of a commit; a restart must make it right.

Five kit processes (``crash_driver.py``) share one database and the simulator over TCP. Each stages
its own import and commits it, and is killed with SIGKILL at one point of the commit:

=============  ==================================================  ===================================
driver         killed                                              the import must end
=============  ==================================================  ===================================
``begin``      after the claim, before BEGIN                       committed, one batch (resumed)
``added``      after the first ADDs                                committed, one batch (resumed)
``unsent``     after ``commit_sent`` was recorded, before COMMIT   not committed, no batch
``inflight``   while COMMIT is in flight (the simulator is slow)   committed, one batch
``returned``   after COMMIT answered, before the outcome is saved  committed, one batch
=============  ==================================================  ===================================

Then only ``python -m adapter reconcile`` runs (a new process, as after a restart), with a 1 s lease,
as many times as needed within a bounded wait. A commit killed before COMMIT was sent is the server's
work still to do: the reconciler resumes it (a new legacy session, from the first record) and waits
for it. It must not believe "not committed" for ``unsent`` before the grace period since COMMIT was
sent; after that it must resolve everything. Finally every
import is checked against the legacy system: committed with exactly its records, in order, in ONE
batch; or not committed with NO batch, and then a commit through the service (same idempotency key)
lands exactly one batch. Runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapter.bootstrap import Kit
from adapter.domain.identity import Principal
from adapter.services.commit import batch_ref_for
from adapter.store import Store
from adapter.store.tables import utcnow
from legacy_sim.engine import LegacyEngine
from tests.support.constants import SECRET
from tests.support.wait import wait_until

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "crash_driver.py"
LEASE_SECONDS = 1
GRACE_SECONDS = 6.0  # above the in-flight COMMIT's latency, so a slow COMMIT is never declared lost
COMMIT_LATENCY_MS = 1500
RECORDS = 37  # chunks of 10: four progress steps

_spec = importlib.util.spec_from_file_location("crash_driver", DRIVER)
assert _spec is not None and _spec.loader is not None
crash_driver = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crash_driver)

# key -> (driver stop point, committed in the end?, recovery point the kill leaves)
CASES: dict[str, tuple[str, bool, str]] = {
    "begin": ("begin", True, "replaying"),  # resumed by the reconciler
    "added": ("added", True, "replaying"),  # resumed by the reconciler
    "unsent": ("commit", False, "commit_sent"),
    "inflight": ("commit", True, "commit_sent"),
    "returned": ("returned", True, "commit_sent"),
}


class Driver:
    """One driver process; a reader thread turns its stdout into a queue of lines."""

    def __init__(self, key: str, point: str, env: dict[str, str], workdir: Path) -> None:
        self.key = key
        self.stderr_path = workdir / f"driver-{key}.stderr"
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), "--point", point, "--key", key, "--records", str(RECORDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_path.open("w"),
            text=True,
            env=env,
            cwd=workdir,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"driver {self.key}: no {prefix!r} line; saw {self.seen}") from None
            if line is None:
                raise AssertionError(
                    f"driver {self.key} exited ({self.proc.poll()}) before {prefix!r}; saw {self.seen}; "
                    f"stderr: {self.stderr_path.read_text()[-2000:]}"
                )
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def adapter_env(db_url: str, address: tuple[str, int], secret: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}
    env.update(
        ADAPTER_DATABASE_URL=db_url,
        ADAPTER_LEGACY_URL=f"tcp://{address[0]}:{address[1]}",
        ADAPTER_SECRET=secret,
        ADAPTER_LEASE_SECONDS=str(LEASE_SECONDS),
        ADAPTER_UNKNOWN_GRACE_SECONDS=str(GRACE_SECONDS),
        ADAPTER_LEGACY_TIMEOUT_SECONDS="10",
        ADAPTER_COMMIT_CHUNK_SIZE="10",
        PYTHONUNBUFFERED="1",
    )
    return env


def run_reconcile(env: dict[str, str], workdir: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "adapter", "reconcile"],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def operation_of(store: Store, import_id: str) -> Any:
    with store.unit_of_work() as uow:
        return uow.operations.latest_commit(import_id)


def commit_sent_at(store: Store, operation_id: str) -> datetime | None:
    with store.unit_of_work() as uow:
        sent = [
            e.created_at
            for e in uow.events.for_operation(operation_id)
            if e.kind == "operation.recovery_point" and (e.detail or {}).get("point") == "commit_sent"
        ]
    return sent[-1] if sent else None


def batches_for(engine: LegacyEngine, import_refs: set[str]) -> list[dict[str, Any]]:
    return [b for b in engine.committed_batches() if b["batch_ref"] in import_refs]


@pytest.fixture
def kit_defaults() -> dict[str, Any]:
    """The in-process kit (what the test checks and commits with) is tuned like the killed ones."""
    return {"lease_seconds": LEASE_SECONDS, "unknown_grace_seconds": GRACE_SECONDS, "tokens": None}


class LatencyWatch:
    """The simulator's sleep for injected latency, counted: a command has reached the simulator
    and is held there (not yet applied) once the count goes up."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, seconds: float) -> None:
        self.calls += 1
        time.sleep(seconds)


@pytest.fixture
def latency() -> LatencyWatch:
    return LatencyWatch()


@pytest.fixture
def legacy_engine(tmp_path: Path, latency: LatencyWatch) -> Iterator[LegacyEngine]:
    """The root fixture's simulator, with its latency sleeps counted."""
    engine = LegacyEngine(tmp_path / "legacy.db", idle_timeout=None, sleep=latency)
    yield engine
    engine.close()


@pytest.mark.slow
def test_kill_9_at_every_point_of_a_commit_then_reconcile(
    db_url: str,
    store: Store,
    kit: Kit,
    legacy_engine: LegacyEngine,
    legacy_address: tuple[str, int],
    latency: LatencyWatch,
    tmp_path: Path,
) -> None:
    env = adapter_env(db_url, legacy_address, SECRET)
    drivers = {key: Driver(key, point, env, tmp_path) for key, (point, _, _) in CASES.items()}
    imports: dict[str, str] = {}
    handles: dict[str, str] = {}
    try:
        # 1. every driver reaches its point and waits there
        for key, (point, _, _) in CASES.items():
            _, import_id, handle = drivers[key].expect("import ").split()
            imports[key], handles[key] = import_id, handle
            drivers[key].expect(f"at {point}")
        # "added" stops once the first records are in the legacy session (its first piece)
        assert any(
            line.startswith("progress ") and float(line.split()[1]) >= 1 for line in drivers["added"].seen
        )

        # 2. the in-flight one sends COMMIT into a slow simulator; everyone is killed meanwhile
        legacy_engine.update_faults(latency_ms=COMMIT_LATENCY_MS)
        drivers["inflight"].send("go")
        drivers["inflight"].expect("sending")
        # the only command after "sending" is COMMIT: once it sleeps in the simulator it is in flight
        wait_until(lambda: latency.calls > 0, what="COMMIT held in the simulator")
        assert batches_for(legacy_engine, {f"adp-{operation_of(store, imports['inflight']).id}"}) == []
        for driver in drivers.values():
            driver.kill()
        for driver in drivers.values():
            assert driver.proc.returncode == -signal.SIGKILL, driver.key
    finally:
        for driver in drivers.values():
            driver.kill()

    # 3. what the dead processes left behind
    operations = {key: operation_of(store, imports[key]) for key in CASES}
    for key, (_, _, point) in CASES.items():
        op = operations[key]
        assert (op.status, op.recovery_point) == ("in_progress", point), key
        assert op.lease_owner is not None
    refs = {key: batch_ref_for(op.id) for key, op in operations.items()}
    # the in-flight COMMIT still lands after its sender died
    wait_until(lambda: batches_for(legacy_engine, {refs["inflight"]}), what="the in-flight COMMIT to land")
    legacy_engine.update_faults(latency_ms=0)
    landed = {b["batch_ref"] for b in legacy_engine.committed_batches()}
    assert landed == {refs["inflight"], refs["returned"]}

    # 4. restart: only the reconciler runs, until everything is resolved (bounded)
    def leases_ran_out() -> bool:
        now = utcnow()
        return all(operation_of(store, imports[key]).lease_expires_at < now for key in CASES)

    wait_until(leases_ran_out, LEASE_SECONDS + 10, what="the dead workers' leases to run out")
    unsent_sent_at = commit_sent_at(store, operations["unsent"].id)
    assert unsent_sent_at is not None
    deadline = time.monotonic() + GRACE_SECONDS + 25
    outputs = []
    early_runs = 0
    while True:
        outputs.append(run_reconcile(env, tmp_path))
        finished = datetime.now(UTC)
        current = {key: operation_of(store, imports[key]) for key in CASES}
        if finished < unsent_sent_at + timedelta(seconds=GRACE_SECONDS):
            # COMMIT was sent (as far as the store knows) too recently to believe it did not land
            assert current["unsent"].status == "in_progress", outputs[-1]
            early_runs += 1
        if all(op.status not in ("in_progress", "outcome_unknown") for op in current.values()):
            break
        assert time.monotonic() < deadline, f"still unresolved: {current}; reconcile said {outputs}"
        time.sleep(0.5)  # the pause between two reconciler runs (what a maintenance loop does)
    print(f"reconcile runs: {len(outputs)}, within the grace period: {early_runs}")
    assert early_runs >= 1, "no reconcile ran inside the grace period: the grace check went untested"
    print("".join(outputs))

    # 5. every import: committed with exactly its records in ONE batch, or not committed and no batch
    who = Principal(subject=crash_driver.PRINCIPAL_SUBJECT, tenant=crash_driver.PRINCIPAL_TENANT)
    all_batches = legacy_engine.committed_batches()
    for key, (_, committed, _) in CASES.items():
        expected = crash_driver.make_records(key, RECORDS)
        view = kit.service.status(who, handles[key])
        mine = [b for b in all_batches if b["batch_ref"] == refs[key]]
        op = current[key]
        if committed:
            assert (view.status, op.status, op.recovery_point) == ("committed", "succeeded", "committed"), key
            [batch] = mine
            assert (batch["legacy_batch_id"], batch["records"]) == (view.legacy_batch_id, expected), key
            again = kit.service.commit(who, handles[key], idempotency_key=key)  # the client retries
            assert (again.status, again.legacy_batch_id, again.replayed) == (
                "committed",
                batch["legacy_batch_id"],
                True,
            )
        else:
            assert (view.status, op.status, op.error["code"]) == ("open", "failed", "not_committed"), key
            assert mine == [], key
            again = kit.service.commit(who, handles[key], idempotency_key=key)  # same key: asks first
            assert (again.status, again.operation_id, again.replayed) == ("committed", op.id, False), key
            [batch] = [b for b in legacy_engine.committed_batches() if b["batch_ref"] == refs[key]]
            assert (batch["legacy_batch_id"], batch["records"]) == (again.legacy_batch_id, expected), key

    # one batch per import, nothing else, and a further reconcile finds nothing to do
    final = legacy_engine.committed_batches()
    assert sorted(b["batch_ref"] for b in final) == sorted(refs.values())
    assert "reconciled 0," in run_reconcile(env, tmp_path)
    assert len(legacy_engine.committed_batches()) == len(CASES)
