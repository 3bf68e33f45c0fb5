"""A seeded fault campaign: many concurrent imports against a faulty legacy system, then the invariants.

Many imports run at once (a thread pool of ``--workers``) through one kit (``adapter.bootstrap.build``)
against the simulator over TCP, while the simulator is made hostile:

* transient errors (``error_rate``) on any command;
* drops after COMMIT (``drop_after_commit``): applied, reply lost;
* latency above the client's timeout on some commits (the kit's port is built with a short timeout,
  and a few imports open a short window of ``latency_ms`` on the simulator right before their COMMIT,
  so the COMMIT times out on the client and still lands later; whatever else runs in the window times
  out too);
* COMMITs lost on the way (the connection dies while COMMIT is written: nothing applied, the kit
  cannot know), so reconciliation must wait out the grace period before believing "not committed";
* COMMITs held past the grace period (the reply never comes, the COMMIT itself reaches the simulator
  ``late_hold_seconds`` later, after the reconciler judged it ``not_committed``), while the client
  retries under the same key (issue 21): the retry may commit again under the same batch reference,
  and the held COMMIT then lands a second batch, which the late-commit watch must find and void;
* cancellations at random points (a ``CancelToken`` set before the commit or from the progress
  callback at a random sent count);
* client retries with the same idempotency key whenever the answer is not ``committed`` (bounded),
  while a maintenance thread runs reconcile passes beside them, as a server does.

Afterwards it drains: maintenance passes plus client retries until nothing is left unresolved
(bounded), then checks, against every batch the legacy system holds:

* no batch twice (per batch reference, and per import across all its commit operations) standing:
  a duplicate is voided by the kit and recorded (``duplicate_voided``) or left to a person with a
  reason (``needs_operator``); no batch is voided without the kit's record of it;
* no committed import without its batch, no batch without its committed import
  (batch_ref -> operation -> import);
* no partial batch (the batch holds exactly the import's records, in order);
* every operation terminal, or ``needs_operator`` with a reason; no import left committing;
* no client was told ``committed`` with a batch other than the one that stands;
* what each tenant holds against its staged-bytes quota, as the store keeps it (``held_bytes.py``),
  is the sum over its imports (``held_bytes_miscounted``).

``run_campaign`` is used by ``tests/resilience/test_fault_campaign.py`` (200 imports) and by this
script standalone::

    .venv/bin/python bench/fault_campaign.py --imports 2000 --seed 1
    .venv/bin/python bench/fault_campaign.py --imports 2000 --seed 1 --db postgres

Standalone it starts its own simulator subprocess (``python -m legacy_sim serve``) and a SQLite file
(or a fresh PostgreSQL schema) in a temporary directory. Seeds make the plan (which import gets which
fault, records, cancel points) and the simulator's dice reproducible; thread interleaving is not, so
individual counts vary a little between runs while the invariant counts must always be zero.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import random
import secrets
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):  # standalone or imported by path: find the kit and the harness
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from harness import DEFAULT_POSTGRES_URL, UNMETERED, fresh_database, simulator  # noqa: E402
from sqlalchemy import select  # noqa: E402

from adapter.bootstrap import Kit, build  # noqa: E402
from adapter.config import load_settings  # noqa: E402
from adapter.domain.identity import Principal  # noqa: E402
from adapter.domain.states import OPERATION_TERMINAL, OperationState  # noqa: E402
from adapter.legacy.forwarding import ForwardingPort, ForwardingSession  # noqa: E402
from adapter.legacy.simulator import SimulatorPort  # noqa: E402
from adapter.ports.legacy import CommittedBatch, LegacyOutcomeUnknown, LegacyPort, LegacySession  # noqa: E402
from adapter.services import CancelToken  # noqa: E402
from adapter.services.late_commits import LATE_COMMIT_EVENT, late_commit_counts  # noqa: E402
from adapter.store.held_bytes import counted_held_bytes, recount_held_bytes  # noqa: E402
from adapter.store.quota_reads import event_details  # noqa: E402
from adapter.store.tables import ImportRow, OperationRow  # noqa: E402
from legacy_sim.client import LegacyClient  # noqa: E402
from legacy_sim.engine import LegacyEngine  # noqa: E402

__all__ = ["CampaignConfig", "Report", "run_campaign"]

UNRESOLVED_OPERATIONS = (OperationState.IN_PROGRESS.value, OperationState.OUTCOME_UNKNOWN.value)
TERMINAL = {state.value for state in OPERATION_TERMINAL}

Address = tuple[str, int]


# --- configuration and plan ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class CampaignConfig:
    imports: int = 200
    seed: int = 1
    workers: int = 4
    max_records: int = 30
    chunk_size: int = 7  # several progress steps (and cancellation points) per import
    legacy_timeout: float = 0.2  # the kit's port timeout; slow commits go above it
    error_rate: float = 0.03
    drop_after_commit: float = 0.08
    slow_commit_rate: float = 0.03  # imports that open a latency window right before their COMMIT
    lose_commit_rate: float = 0.04  # imports whose first COMMIT is lost before reaching the simulator
    late_commit_rate: float = 0.03  # imports whose first COMMIT is held past the grace period
    late_hold_seconds: float = 2.5  # how long: above unknown_grace_seconds, so the verdict comes first
    slow_latency_ms: float = 350.0
    slow_window_seconds: float = 0.45
    cancel_rate: float = 0.12  # half before the commit, half at a random sent count
    abandon_rate: float = 0.3  # of the cancelled imports: never retried (half of them aborted)
    client_retries: int = 6
    lease_seconds: float = 5.0
    unknown_grace_seconds: float = 1.5  # above slow_latency_ms: a late COMMIT lands well within it
    maintenance_interval: float = 0.25
    drain_seconds: float = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """What happens to one import; a pure function of (seed, index)."""

    index: int
    records: list[dict[str, Any]]
    slow_commit: bool
    lose_commit: bool
    late_commit: bool
    cancel: str | None  # None, "before", "during"
    cancel_at: int
    abandon: str | None  # None, "leave", "abort"

    @classmethod
    def make(cls, config: CampaignConfig, index: int) -> Plan:
        rng = random.Random(config.seed * 1_000_003 + index)
        count = rng.randint(1, config.max_records)
        records = [{"imp": index, "seq": s, "v": rng.randrange(10**6)} for s in range(count)]
        cancel = None
        if rng.random() < config.cancel_rate:
            cancel = "before" if rng.random() < 0.5 else "during"
        abandon = None
        if cancel is not None and rng.random() < config.abandon_rate:
            abandon = "abort" if rng.random() < 0.5 else "leave"
        return cls(
            index=index,
            records=records,
            slow_commit=rng.random() < config.slow_commit_rate,
            lose_commit=rng.random() < config.lose_commit_rate,
            late_commit=rng.random() < config.late_commit_rate,
            cancel=cancel,
            cancel_at=rng.randint(1, count),
            abandon=abandon,
        )


# --- what happened -------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class ImportTrace:
    plan: Plan
    principal: Principal
    handle: str = ""
    import_id: str = ""
    answers: list[str] = dataclasses.field(default_factory=list)
    told_committed: set[str] = dataclasses.field(default_factory=set)  # batch ids a client was given
    exceptions: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class Report:
    config: dict[str, Any]
    wall_seconds: float = 0.0
    load_seconds: float = 0.0
    drain_seconds: float = 0.0
    drain_rounds: int = 0
    # outcomes
    imports_committed: int = 0
    imports_open: int = 0
    imports_aborted: int = 0
    imports_other: dict[str, int] = dataclasses.field(default_factory=dict)
    legacy_batches: int = 0
    answers: dict[str, int] = dataclasses.field(default_factory=dict)  # every commit answer a client got
    reconciled: dict[str, int] = dataclasses.field(default_factory=dict)  # finding -> count
    operations: dict[str, int] = dataclasses.field(default_factory=dict)  # commit op status -> count
    commit_operations_retried: int = 0  # operations whose commit ran more than once (same key)
    slow_windows: int = 0
    commits_lost: int = 0
    commits_held: int = 0  # COMMITs held past the grace period (and delivered late)
    late_findings: dict[str, int] = dataclasses.field(default_factory=dict)  # the late-commit watch's
    batches_voided: int = 0  # duplicates the kit voided (each recorded)
    duplicates_to_operator: int = 0  # batch references with two standing batches, left to a person
    client_exceptions: dict[str, int] = dataclasses.field(default_factory=dict)
    # invariants: every one must be zero
    batch_twice_per_ref: int = 0
    batch_voided_unrecorded: int = 0
    batch_twice_per_import: int = 0
    committed_without_batch: int = 0
    batch_without_committed_import: int = 0
    partial_or_wrong_batch: int = 0
    uncommitted_with_batch: int = 0
    operation_not_terminal: int = 0
    needs_operator_without_reason: int = 0
    import_unresolved: int = 0
    client_told_wrong_batch: int = 0
    held_bytes_miscounted: int = 0  # tenants whose kept total is not the sum over their imports
    problems: list[str] = dataclasses.field(default_factory=list)

    INVARIANTS = (
        "batch_twice_per_ref",
        "batch_voided_unrecorded",
        "batch_twice_per_import",
        "committed_without_batch",
        "batch_without_committed_import",
        "partial_or_wrong_batch",
        "uncommitted_with_batch",
        "operation_not_terminal",
        "needs_operator_without_reason",
        "import_unresolved",
        "client_told_wrong_batch",
        "held_bytes_miscounted",
    )

    def violations(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.INVARIANTS if getattr(self, name)}

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def render(self) -> str:
        c = self.config
        lines = [
            f"fault campaign: {c['imports']} imports, seed {c['seed']}, {c['workers']} workers, db {c['db']}",
            f"  wall {self.wall_seconds:.1f} s (load {self.load_seconds:.1f} s, "
            f"drain {self.drain_seconds:.1f} s in {self.drain_rounds} rounds)",
            f"  imports: committed {self.imports_committed}, open (never committed) {self.imports_open}, "
            f"aborted {self.imports_aborted}"
            + (f", other {self.imports_other}" if self.imports_other else ""),
            f"  legacy batches standing: {self.legacy_batches}; voided duplicates: {self.batches_voided}; "
            f"left to an operator: {self.duplicates_to_operator}",
            f"  commit answers seen by clients: {dict(sorted(self.answers.items()))}",
            f"  commit operations by final status: {dict(sorted(self.operations.items()))}; "
            f"re-run under the same key: {self.commit_operations_retried}",
            f"  reconciler findings: {dict(sorted(self.reconciled.items()))}",
            f"  latency windows opened: {self.slow_windows}; "
            f"COMMITs lost before the simulator: {self.commits_lost}; "
            f"held past the grace period: {self.commits_held}",
            f"  late-commit watch findings: {dict(sorted(self.late_findings.items()))}",
            f"  client exceptions: {dict(sorted(self.client_exceptions.items())) or 0}",
            "  invariants (all must be 0):",
        ]
        lines += [f"    {name:<32} {getattr(self, name)}" for name in self.INVARIANTS]
        lines += [f"  problem: {p}" for p in self.problems[:20]]
        return "\n".join(lines)


# --- infrastructure ---------------------------------------------------------------------------------


LOSE_TARGET = "campaign-lose"
"""The target of imports whose first COMMIT is lost: the session learns it at BEGIN (a commit runs on
the server's runner thread, not the client's, so nothing of the client's thread reaches it)."""
LATE_TARGET = "campaign-late"
"""The target of imports whose first COMMIT is held past the grace period, learnt the same way."""


class _LosingSession(ForwardingSession):
    """Loses the first COMMIT of an import whose plan says so (the connection dies, nothing is
    sent), or holds it: the kit hears nothing back, and the COMMIT reaches the simulator later."""

    def __init__(self, inner: LegacySession, port: LosingPort) -> None:
        super().__init__(inner)
        self._port = port
        self._ref = ""
        self._target = ""
        self._held = False

    def begin(self, batch_ref: str, target: str = "") -> None:
        self._ref, self._target = batch_ref, target
        super().begin(batch_ref, target)

    def commit(self) -> CommittedBatch:
        if self._target == LOSE_TARGET and self._port.lose_once(self._ref):
            self._inner.close()  # the simulator drops the session: the batch is gone
            raise LegacyOutcomeUnknown(
                f"legacy commit (batch_ref={self._ref}): connection reset while sending"
            )
        if self._target == LATE_TARGET and self._port.hold_once(self._ref, self._inner):
            self._held = True  # the session is the held COMMIT's now; it closes it
            raise LegacyOutcomeUnknown(f"legacy commit (batch_ref={self._ref}): no reply")
        return super().commit()

    def close(self) -> None:
        if not self._held:
            super().close()


class LosingPort(ForwardingPort):
    """The simulator port, with COMMITs that can be lost before they reach the simulator, or held
    past the grace period (``hold_seconds``) and delivered then, on their own session."""

    def __init__(self, inner: LegacyPort, hold_seconds: float) -> None:
        super().__init__(inner)
        self._hold_seconds = hold_seconds
        self._lost: set[str] = set()
        self._held: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def lose_once(self, batch_ref: str) -> bool:
        with self._lock:
            if batch_ref in self._lost:
                return False
            self._lost.add(batch_ref)
            return True

    def hold_once(self, batch_ref: str, session: LegacySession) -> bool:
        """Deliver this COMMIT ``hold_seconds`` from now, unless one of this batch was held before."""
        with self._lock:
            if batch_ref in self._held:
                return False

            def deliver() -> None:
                time.sleep(self._hold_seconds)
                try:
                    session.commit()  # may fail as any COMMIT may (the simulator's faults are on)
                except Exception:
                    logging.getLogger("campaign").info("held COMMIT of %s failed", batch_ref)
                finally:
                    session.close()

            thread = threading.Thread(target=deliver, name=f"held-commit-{batch_ref}", daemon=True)
            self._held[batch_ref] = thread
        thread.start()
        return True

    def wait_held(self) -> None:
        """Until every held COMMIT was delivered."""
        with self._lock:
            threads = list(self._held.values())
        for thread in threads:
            thread.join()

    @property
    def lost(self) -> int:
        return len(self._lost)

    @property
    def held(self) -> int:
        return len(self._held)

    def open_session(self) -> _LosingSession:
        return _LosingSession(self._inner.open_session(), self)


def build_kit(database_url: str, address: Address, config: CampaignConfig) -> tuple[Kit, LosingPort]:
    """The kit as production wires it, with a port whose timeout is short and fast retries."""
    settings = load_settings(
        database_url=database_url,
        legacy_url=f"tcp://{address[0]}:{address[1]}",
        legacy_timeout_seconds=config.legacy_timeout,
        secret=secrets.token_hex(32),
        commit_chunk_size=config.chunk_size,
        lease_seconds=config.lease_seconds,
        unknown_grace_seconds=config.unknown_grace_seconds,
        # One tenant stands in for many clients here: its concurrent commits are the point, not a quota.
        max_commits_per_tenant=1000,
        **UNMETERED,
    )
    losing = LosingPort(
        SimulatorPort.tcp(*address, timeout=config.legacy_timeout), hold_seconds=config.late_hold_seconds
    )
    kit = build(settings, legacy=losing)
    ctx = kit.service.ctx
    ctx.commit_policy = dataclasses.replace(ctx.commit_policy, retry_wait_initial=0.005, retry_wait_max=0.05)
    return kit, losing


class FaultControl:
    """Turns the simulator's knobs over its own FAULTS command (a separate, patient connection)."""

    def __init__(self, address: Address) -> None:
        self._address = address
        self._lock = threading.Lock()
        self._window = threading.Lock()
        self.windows = 0

    def set(self, **knobs: Any) -> None:
        with self._lock, LegacyClient(*self._address, timeout=30.0) as client:
            client.faults(**knobs)

    def slow_window(self, latency_ms: float, seconds: float) -> bool:
        """Open one latency window (if none is open): everything sent in it answers late."""
        if not self._window.acquire(blocking=False):
            return False
        try:
            self.set(latency_ms=latency_ms)
        except Exception:
            self._window.release()
            raise
        self.windows += 1

        def close() -> None:
            try:
                time.sleep(seconds)
                self.set(latency_ms=0)
            finally:
                self._window.release()

        threading.Thread(target=close, name="latency-window", daemon=True).start()
        return True

    def wait_windows_closed(self) -> None:
        with self._window:
            pass


# --- the campaign ----------------------------------------------------------------------------------


class _Campaign:
    def __init__(self, kit: Kit, config: CampaignConfig, faults: FaultControl) -> None:
        self.kit = kit
        self.service = kit.service
        self.config = config
        self.faults = faults
        self.traces: list[ImportTrace] = []
        self.stop_maintenance = threading.Event()
        self.maintenance_errors: collections.Counter[str] = collections.Counter()

    # one import, as a client would drive it
    def run_import(self, trace: ImportTrace) -> None:
        plan, who, service = trace.plan, trace.principal, self.service
        key = f"campaign-{plan.index}"
        target = LOSE_TARGET if plan.lose_commit else LATE_TARGET if plan.late_commit else "campaign"
        begun = self._call(trace, lambda: service.begin(who, target, idempotency_key=f"{key}-b"))
        trace.handle = begun.handle
        trace.import_id = service.status(who, trace.handle).import_id
        rng = random.Random(self.config.seed * 7919 + plan.index)
        records, position, part = plan.records, 0, 0
        while position < len(records):
            size = rng.randint(1, len(records) - position)
            chunk = records[position : position + size]
            self._call(
                trace,
                lambda c=chunk, n=part: service.add(who, trace.handle, c, idempotency_key=f"{key}-a{n}"),
            )
            position, part = position + size, part + 1
        self._commit_with_retries(trace, key, rng)

    def _commit_with_retries(self, trace: ImportTrace, key: str, rng: random.Random) -> None:
        plan = trace.plan
        for attempt in range(self.config.client_retries):
            cancel = CancelToken() if attempt == 0 and plan.cancel else None
            if cancel is not None and plan.cancel == "before":
                cancel.cancel()

            def progress(
                sent: int, total: int, cancel: CancelToken | None = cancel, first: bool = attempt == 0
            ) -> None:
                if cancel is not None and plan.cancel == "during" and sent >= plan.cancel_at:
                    cancel.cancel()
                if first and plan.slow_commit and sent == total:
                    self.faults.slow_window(self.config.slow_latency_ms, self.config.slow_window_seconds)

            try:
                result = self.service.commit(
                    trace.principal, trace.handle, idempotency_key=key, progress=progress, cancel=cancel
                )
            except Exception as exc:  # recorded and reported; the campaign goes on
                trace.exceptions.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.05)
                continue
            trace.answers.append(result.status)
            if result.status == "committed":
                assert result.legacy_batch_id is not None
                trace.told_committed.add(result.legacy_batch_id)
                return
            if result.status == "cancelled" and plan.abandon is not None:
                if plan.abandon == "abort":
                    self._call(trace, lambda: self.service.abort(trace.principal, trace.handle))
                return
            time.sleep(rng.uniform(0.05, 0.3) * (attempt + 1))

    def retry_open(self, trace: ImportTrace) -> bool:
        """Drain phase: a client that comes back and commits again with its key. True if done."""
        if trace.plan.abandon is not None or not trace.handle:
            return True
        key = f"campaign-{trace.plan.index}"
        try:
            result = self.service.commit(trace.principal, trace.handle, idempotency_key=key)
        except Exception as exc:
            trace.exceptions.append(f"{type(exc).__name__}: {exc}")
            return False
        trace.answers.append(result.status)
        if result.status == "committed":
            assert result.legacy_batch_id is not None
            trace.told_committed.add(result.legacy_batch_id)
            return True
        return False

    @staticmethod
    def _call(trace: ImportTrace, fn: Any) -> Any:
        for _ in range(5):
            try:
                return fn()
            except Exception as exc:
                trace.exceptions.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.05)
        return fn()

    def maintenance_loop(self) -> None:
        while not self.stop_maintenance.wait(self.config.maintenance_interval):
            self.maintain_once()

    def maintain_once(self) -> int:
        try:
            return len(self.service.maintain().resolutions)
        except Exception as exc:
            self.maintenance_errors[type(exc).__name__] += 1
            logging.getLogger("campaign").warning("maintenance pass failed", exc_info=True)
            return 0

    def unresolved(self) -> int:
        with self.kit.store.unit_of_work() as uow:
            return len(
                list(
                    uow.session.scalars(
                        select(OperationRow.id).where(OperationRow.status.in_(UNRESOLVED_OPERATIONS))
                    )
                )
            )


def run_campaign(
    database_url: str,
    address: Address,
    legacy_db: Path,
    config: CampaignConfig | None = None,
    *,
    db_label: str = "",
) -> Report:
    """Run the campaign against a migrated, empty database and a running simulator; check; report."""
    config = config or CampaignConfig()
    report = Report(config={**dataclasses.asdict(config), "db": db_label or database_url.split(":")[0]})
    faults = FaultControl(address)
    faults.set(
        seed=config.seed,
        error_rate=config.error_rate,
        drop_after_commit=config.drop_after_commit,
        latency_ms=0,
    )
    kit, losing = build_kit(database_url, address, config)
    campaign = _Campaign(kit, config, faults)
    started = time.perf_counter()
    try:
        campaign.traces = [
            ImportTrace(Plan.make(config, i), Principal(subject=f"client-{i % 5}", tenant="campaign"))
            for i in range(config.imports)
        ]
        maintenance = threading.Thread(target=campaign.maintenance_loop, name="maintenance", daemon=True)
        maintenance.start()
        with ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="client") as pool:
            for future in [pool.submit(campaign.run_import, t) for t in campaign.traces]:
                try:
                    future.result()
                except Exception as exc:
                    report.problems.append(f"client thread died: {type(exc).__name__}: {exc}")
        campaign.stop_maintenance.set()
        maintenance.join(timeout=60)
        faults.wait_windows_closed()
        report.load_seconds = time.perf_counter() - started
        _drain(campaign, faults, report)
        losing.wait_held()  # every held COMMIT has landed (or failed) now: the watch must see it
        _drain(campaign, faults, report)
        report.wall_seconds = time.perf_counter() - started
        _check(campaign, legacy_db, report)
    finally:
        kit.close()
    report.slow_windows = faults.windows
    report.commits_lost = losing.lost
    report.commits_held = losing.held
    for name, count in campaign.maintenance_errors.items():
        report.client_exceptions[f"maintenance:{name}"] = count
    return report


def _drain(campaign: _Campaign, faults: FaultControl, report: Report) -> None:
    """Maintenance passes and client retries until nothing is unresolved; faults go off half-way."""
    config = campaign.config
    started = time.perf_counter()
    deadline = started + config.drain_seconds
    pending = [t for t in campaign.traces if t.handle]
    faults_on = True
    while time.perf_counter() < deadline:
        report.drain_rounds += 1
        if faults_on and time.perf_counter() - started > config.drain_seconds / 3:
            faults.set(error_rate=0.0, drop_after_commit=0.0, latency_ms=0)
            faults_on = False
        campaign.maintain_once()
        pending = [t for t in pending if not _settled(campaign, t) and not campaign.retry_open(t)]
        if not pending and campaign.unresolved() == 0:
            break
        time.sleep(min(0.5, config.unknown_grace_seconds / 3))
    faults.set(error_rate=0.0, drop_after_commit=0.0, latency_ms=0)
    report.drain_seconds += time.perf_counter() - started


def _settled(campaign: _Campaign, trace: ImportTrace) -> bool:
    with campaign.kit.store.unit_of_work() as uow:
        row = uow.imports.get(trace.import_id)
        return row is not None and row.state in ("committed", "aborted")


# --- invariants ------------------------------------------------------------------------------------


def _check(campaign: _Campaign, legacy_db: Path, report: Report) -> None:
    engine = LegacyEngine(legacy_db, idle_timeout=None)
    try:
        batches = engine.committed_batches()
    finally:
        engine.close()
    report.legacy_batches = sum(1 for b in batches if not b["voided"])
    report.batches_voided = sum(1 for b in batches if b["voided"])
    report.late_findings = late_commit_counts(campaign.kit.service.ctx)
    traces = {t.import_id: t for t in campaign.traces if t.import_id}
    with campaign.kit.store.unit_of_work() as uow:
        imports = {row.id: row for row in uow.session.scalars(select(ImportRow))}
        operations = list(uow.session.scalars(select(OperationRow)))
        voided_by_kit = {
            str(batch_id)
            for detail in event_details(uow.session, LATE_COMMIT_EVENT)
            for batch_id in (detail or {}).get("voided", [])
        }
        counted, recounted = counted_held_bytes(uow.session), recount_held_bytes(uow.session)
        reconciled = [
            (e.detail or {}).get("finding")
            for op in operations
            if op.kind == "commit"
            for e in uow.events.for_operation(op.id)
            if e.kind == "operation.reconciled"
        ]
    report.reconciled = dict(collections.Counter(str(f) for f in reconciled))
    op_by_ref = {op.batch_ref: op for op in operations if op.batch_ref}
    commit_ops = [op for op in operations if op.kind == "commit"]
    report.operations = dict(collections.Counter(op.status for op in commit_ops))
    report.commit_operations_retried = sum(1 for op in commit_ops if op.attempts > 1)

    def problem(kind: str, message: str) -> None:
        setattr(report, kind, getattr(report, kind) + 1)
        report.problems.append(f"{kind}: {message}")

    # what each tenant holds against its staged-bytes quota, kept by the store's triggers through
    # every crash and retry of the campaign, against the sum over its imports
    for tenant in sorted(set(counted) | set(recounted)):
        if counted.get(tenant, 0) != recounted.get(tenant, 0):
            problem(
                "held_bytes_miscounted",
                f"{tenant}: kept {counted.get(tenant)}, imports {recounted.get(tenant)}",
            )

    # batches by reference and by import; a voided batch is a duplicate the kit compensated, and
    # only one the kit recorded as such may be voided
    for batch in batches:
        if batch["voided"] and batch["legacy_batch_id"] not in voided_by_kit:
            problem("batch_voided_unrecorded", f"{batch['legacy_batch_id']} ({batch['batch_ref']})")
    standing = [b for b in batches if not b["voided"]]
    by_ref: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for batch in standing:
        by_ref[batch["batch_ref"]].append(batch)
    to_operator: set[str] = set()  # imports with two standing batches that a person was given
    by_import: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for ref, found in by_ref.items():
        op = op_by_ref.get(ref)
        if op is None or op.import_id is None:
            problem("batch_without_committed_import", f"{ref}: no operation")
            continue
        if len(found) > 1:
            if op.status == OperationState.NEEDS_OPERATOR.value and op.error:
                report.duplicates_to_operator += 1
                to_operator.add(op.import_id)
            else:
                problem("batch_twice_per_ref", f"{ref}: {[b['legacy_batch_id'] for b in found]}")
        by_import[op.import_id].extend(found)
    for import_id, found in by_import.items():
        if len(found) > 1 and import_id not in to_operator:
            problem("batch_twice_per_import", f"{import_id}: {[b['legacy_batch_id'] for b in found]}")

    # every import against what its client staged and what the legacy system holds
    for import_id, row in imports.items():
        trace = traces.get(import_id)
        found = by_import.get(import_id, [])
        if row.state in ("committing", "outcome_unknown"):
            problem("import_unresolved", f"{import_id} is {row.state}")
        if row.state == "committed":
            report.imports_committed += 1
            kept = [b for b in found if b["legacy_batch_id"] == row.legacy_batch_id]
            if not kept:
                problem("committed_without_batch", f"{import_id}: {row.legacy_batch_id} not in legacy")
                continue
            batch = kept[0]
            expected = trace.plan.records if trace else None
            if batch["record_count"] != row.record_count or (
                expected is not None and batch["records"] != expected
            ):
                problem("partial_or_wrong_batch", f"{import_id}: {batch['record_count']}/{row.record_count}")
            if trace and trace.told_committed - {row.legacy_batch_id}:
                problem("client_told_wrong_batch", f"{import_id}: told {sorted(trace.told_committed)}")
        else:
            if row.state == "open":
                report.imports_open += 1
            elif row.state == "aborted":
                report.imports_aborted += 1
            else:
                report.imports_other[row.state] = report.imports_other.get(row.state, 0) + 1
            if found:
                problem("uncommitted_with_batch", f"{import_id} is {row.state} with {len(found)} batch(es)")
            if trace and trace.told_committed:
                problem(
                    "client_told_wrong_batch", f"{import_id} is {row.state} but a client was told committed"
                )
    for batch in standing:
        op = op_by_ref.get(batch["batch_ref"])
        row = imports.get(op.import_id) if op is not None and op.import_id else None
        if op is not None and op.import_id in to_operator:
            continue  # a person has it, with the reason (checked below)
        if op is not None and (
            row is None
            or row.state != "committed"
            or row.legacy_batch_id != batch["legacy_batch_id"]
            or op.status != OperationState.SUCCEEDED.value
        ):
            problem(
                "batch_without_committed_import",
                f"{batch['legacy_batch_id']} ({batch['batch_ref']}): import "
                f"{row.state if row else None}, operation {op.status}",
            )
    for op in operations:
        if op.status == OperationState.NEEDS_OPERATOR.value:
            if not op.error:
                problem("needs_operator_without_reason", op.id)
        elif op.status not in TERMINAL:
            problem("operation_not_terminal", f"{op.kind} {op.id} is {op.status}")

    answers: collections.Counter[str] = collections.Counter()
    exceptions: collections.Counter[str] = collections.Counter()
    for trace in campaign.traces:
        answers.update(trace.answers)
        exceptions.update(e.split(":")[0] for e in trace.exceptions)
    report.answers = dict(answers)
    report.client_exceptions = dict(exceptions)
    if len(campaign.traces) != len(imports):
        report.problems.append(f"{len(campaign.traces)} clients but {len(imports)} imports")


# --- standalone ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--imports", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--drain-seconds", type=float, default=120.0)
    parser.add_argument("--json", action="store_true", help="also print the report as one JSON line")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    config = CampaignConfig(
        imports=args.imports, seed=args.seed, workers=args.workers, drain_seconds=args.drain_seconds
    )
    with tempfile.TemporaryDirectory(prefix="fault-campaign-") as tmp:
        workdir = Path(tmp)
        with (
            simulator(workdir) as address,
            fresh_database(args.db, workdir, args.postgres_url) as url,
        ):
            report = run_campaign(url, address, workdir / "legacy.db", config, db_label=args.db)
    print(report.render())
    if args.json:
        print(json.dumps(report.to_dict(), default=str, sort_keys=True))
    return 1 if report.violations() or report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
