"""The legacy port contract as reusable checks: what the kit relies on, proven against your port.

Each :class:`Rule` exercises the port directly (no kit, no database) and raises
:class:`ContractViolation` with what it saw when the port breaks the rule. :func:`run_contract` runs
them all and reports each; ``python -m adapter check-port`` prints that report and
:class:`adapter.testing.PortContract` turns every rule into a pytest test.

The checks commit real batches under references starting with ``contract-`` and void them again, so
run them against a test instance of your system, never production.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from adapter.ports.legacy import (
    WILDCARD_TARGET,
    BatchStatus,
    CommittedBatch,
    LegacyFailed,
    LegacyOutcomeUnknown,
    LegacyPort,
    LegacySession,
    LegacyTransient,
    Target,
)
from adapter.ports.targets import port_targets
from adapter.services.targets import RecordInvalid, TargetRules
from adapter.testing.samples import sample_records

__all__ = [
    "RULES",
    "ContractSubject",
    "ContractViolation",
    "FaultHook",
    "Rule",
    "RuleResult",
    "run_contract",
]

FaultHook = Callable[[Any], AbstractContextManager[None]]
"""``hook(port)``: a context manager during which the system misbehaves in one way. The contract knows
two: ``lose_commit_reply`` (the next COMMIT is applied and its reply is lost, a dropped connection, a
read timeout: the port must then raise ``LegacyOutcomeUnknown``) and ``system_down`` (the system
cannot be reached at all: every call must raise ``LegacyTransient``)."""

READINESS_BUDGET_SECONDS = 2.0
THREADS = 6


class ContractViolation(AssertionError):
    """The port broke a rule; the message says what was expected and what happened."""


@dataclass
class ContractSubject:
    """The port under test and what the checks need to drive it."""

    port: Any
    target: str = ""
    lose_commit_reply: FaultHook | None = None
    records: Callable[[int, int], list[dict[str, Any]]] | None = None
    """``records(start, count)``; by default generated from the target's schema."""
    system_down: FaultHook | None = None
    samples: Sequence[Mapping[str, Any]] | None = None
    """Sample records (or parts of records): record ``n`` is generated from the schema and then takes
    every field of ``samples[n % len(samples)]``. Give the fields the generator cannot know (a
    foreign key, a pattern), leave out keys so they stay unique."""
    _salt: int = field(default_factory=lambda: secrets.randbelow(10**6) * 1000)
    _counter: int = 0

    def __post_init__(self) -> None:
        targets = port_targets(self.port)
        declared = [t for t in targets if t.name != WILDCARD_TARGET]
        if not self.target:
            self.target = declared[0].name if declared else "contract"
        self.rules = TargetRules(targets)
        self.schema: Target = self.rules.require(self.target).target

    def make(self, count: int) -> list[dict[str, Any]]:
        """``count`` new records that satisfy the target's schema (checked, so a bad generator shows)."""
        start, self._counter = self._counter, self._counter + count
        if self.records is not None:
            made = self.records(start, count)
        else:
            made = sample_records(self.schema.schema, start, count, salt=self._salt)
            if self.samples:
                given = self.samples
                made = [{**record, **given[(start + i) % len(given)]} for i, record in enumerate(made)]
        try:
            self.rules.require(self.target).check(made)
        except RecordInvalid as exc:
            raise ContractViolation(self._unsatisfied(exc)) from None
        return made

    def _unsatisfied(self, exc: RecordInvalid) -> str:
        """What to do when the records do not satisfy the target: name the source and the fix."""
        target = f"target {self.target!r}"
        if self.records is not None:
            return f"the records of contract_records() do not satisfy {target}: {exc}"
        source = "the records made from the sample records" if self.samples else "records generated for"
        return (
            f"{source} {target} do not satisfy it: {exc}. The generator uses each field's default, "
            "examples, enum, type, format and bounds; it cannot invent a value for a pattern, a "
            "foreign key or a rule of your own. Give the field examples (pydantic: "
            'Field(examples=[...]); JSON Schema: "examples": [...]) or give sample records: '
            "check-port --records FILE.json (a JSON list of records or parts of records), in pytest "
            "a contract_samples fixture"
        )

    @staticmethod
    def ref(label: str) -> str:
        return f"contract-{label}-{secrets.token_hex(6)}"


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    description: str
    check: Callable[[ContractSubject], None]


@dataclass(frozen=True, slots=True)
class RuleResult:
    rule: str
    description: str
    status: Literal["pass", "fail", "skip"]
    detail: str = ""
    seconds: float = 0.0


class RuleSkipped(Exception):
    """The rule cannot be checked with what was provided (e.g. no fault hook)."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ContractViolation(message)


def _expect_raises(expected: type[Exception], call: Callable[[], object], what: str, silent: str) -> None:
    """The rule holds only if ``call`` raises ``expected``; ``what`` names the call, ``silent`` is the
    violation when it raises nothing."""
    try:
        call()
    except expected:
        return
    except Exception as exc:
        raise ContractViolation(f"{what} raised {type(exc).__name__}") from exc
    raise ContractViolation(silent)


@contextmanager
def _session(subject: ContractSubject) -> Iterator[LegacySession]:
    session = subject.port.open_session()
    try:
        yield session
    finally:
        session.close()


def _commit(subject: ContractSubject, ref: str, records: Sequence[dict[str, Any]]) -> CommittedBatch:
    with _session(subject) as session:
        session.begin(ref, subject.target)
        half = max(1, len(records) // 2)
        session.add(records[:half])
        if records[half:]:
            session.add(records[half:])
        batch = session.commit()
    _expect(isinstance(batch, CommittedBatch), f"commit() returned {type(batch).__name__}")
    _expect(bool(batch.legacy_batch_id), "commit() returned an empty legacy_batch_id")
    _expect(
        batch.record_count == len(records),
        f"commit() reported {batch.record_count} records, {len(records)} were added",
    )
    return batch


def _status(subject: ContractSubject, ref: str) -> BatchStatus:
    status: BatchStatus = subject.port.batch_status(ref)
    _expect(isinstance(status, BatchStatus), f"batch_status() returned {type(status).__name__}")
    return status


def _listed(status: BatchStatus) -> list[tuple[str, int, bool]]:
    return [(b.legacy_batch_id, b.record_count, b.voided) for b in status.batches]


# --- the rules -----------------------------------------------------------------------------------


def protocols(subject: ContractSubject) -> None:
    _expect(isinstance(subject.port, LegacyPort), "the port lacks open_session, batch_status or void_batch")
    with _session(subject) as session:
        _expect(isinstance(session, LegacySession), "open_session() returned no LegacySession")
    subject.make(2)  # the target's schema compiles and generated records satisfy it


def session_commits(subject: ContractSubject) -> None:
    ref = subject.ref("commit")
    batch = _commit(subject, ref, subject.make(5))
    listed = _listed(_status(subject, ref))
    _expect(listed == [(batch.legacy_batch_id, 5, False)], f"batch_status after one commit listed {listed}")
    subject.port.void_batch(batch.legacy_batch_id)


def session_rolls_back(subject: ContractSubject) -> None:
    ref = subject.ref("rollback")
    with _session(subject) as session:
        session.begin(ref, subject.target)
        session.add(subject.make(3))
        session.rollback()
    _expect(_listed(_status(subject, ref)) == [], "a rolled-back batch shows in batch_status")
    with _session(subject) as session:  # an abandoned session: closed without commit or rollback
        session.begin(ref, subject.target)
        session.add(subject.make(2))
    _expect(_listed(_status(subject, ref)) == [], "a batch of a closed, uncommitted session shows")
    batch = _commit(subject, ref, subject.make(4))  # the kit reuses a reference after an abandoned try
    listed = _listed(_status(subject, ref))
    _expect(listed == [(batch.legacy_batch_id, 4, False)], f"reusing the reference listed {listed}")
    subject.port.void_batch(batch.legacy_batch_id)


def refusals_raise_failed(subject: ContractSubject) -> None:
    unknown = f"contract-no-such-batch-{secrets.token_hex(6)}"
    what = "void_batch of an unknown batch"
    silent = "void_batch of an unknown batch id did not raise LegacyFailed"
    _expect_raises(LegacyFailed, lambda: subject.port.void_batch(unknown), what, silent)
    with _session(subject) as session:
        silent = "commit in a session with no open batch did not raise LegacyFailed"
        _expect_raises(LegacyFailed, session.commit, "commit without begin", silent)


def batch_status_is_exact(subject: ContractSubject) -> None:
    twice, once, never = subject.ref("twice"), subject.ref("once"), subject.ref("never")
    first = _commit(subject, twice, subject.make(2))
    second = _commit(subject, twice, subject.make(3))  # COMMIT is not idempotent: two batches
    other = _commit(subject, once, subject.make(1))
    subject.port.void_batch(first.legacy_batch_id)
    listed = _listed(_status(subject, twice))
    expected = [(first.legacy_batch_id, 2, True), (second.legacy_batch_id, 3, False)]
    _expect(listed == expected, f"batch_status listed {listed}, expected {expected} (oldest first)")
    listed = _listed(_status(subject, once))
    _expect(listed == [(other.legacy_batch_id, 1, False)], f"another reference listed {listed}")
    _expect(_listed(_status(subject, never)) == [], "a reference never committed lists batches")
    for batch in (second, other):
        subject.port.void_batch(batch.legacy_batch_id)


def void_is_idempotent(subject: ContractSubject) -> None:
    ref = subject.ref("void")
    batch = _commit(subject, ref, subject.make(2))
    first = subject.port.void_batch(batch.legacy_batch_id)
    again = subject.port.void_batch(batch.legacy_batch_id)
    _expect(
        (first.legacy_batch_id, first.already_voided) == (batch.legacy_batch_id, False),
        f"the first void answered {first}",
    )
    _expect(
        (again.legacy_batch_id, again.already_voided) == (batch.legacy_batch_id, True),
        f"a repeated void answered {again}",
    )
    listed = _listed(_status(subject, ref))
    _expect(listed == [(batch.legacy_batch_id, 2, True)], f"after void batch_status listed {listed}")


def concurrent_sessions(subject: ContractSubject) -> None:
    refs = [subject.ref(f"thread{i}") for i in range(THREADS)]
    batches = {ref: subject.make(3 + i) for i, ref in enumerate(refs)}
    barrier = threading.Barrier(THREADS)

    def one(ref: str) -> CommittedBatch:
        with _session(subject) as session:
            barrier.wait(timeout=30)  # every session is open at the same time
            session.begin(ref, subject.target)
            session.add(batches[ref])
            subject.port.batch_status(ref)  # session-free questions while sessions are open
            return session.commit()

    with ThreadPoolExecutor(THREADS) as pool:
        committed = dict(zip(refs, pool.map(one, refs), strict=True))
    for ref, batch in committed.items():
        listed = _listed(_status(subject, ref))
        expected = [(batch.legacy_batch_id, len(batches[ref]), False)]
        _expect(listed == expected, f"concurrent commit under {ref}: listed {listed}, expected {expected}")
        subject.port.void_batch(batch.legacy_batch_id)
    ids = {b.legacy_batch_id for b in committed.values()}
    _expect(len(ids) == THREADS, "concurrent commits were given the same legacy_batch_id")


def readiness_is_fast(subject: ContractSubject) -> None:
    started = time.perf_counter()
    status = _status(subject, "readiness-probe")
    took = time.perf_counter() - started
    _expect(isinstance(status.batches, tuple), "batch_status('readiness-probe') gave no batches tuple")
    _expect(took <= READINESS_BUDGET_SECONDS, f"batch_status('readiness-probe') took {took:.2f}s")


def lost_commit_reply_is_unknown(subject: ContractSubject) -> None:
    if subject.lose_commit_reply is None:
        raise RuleSkipped("no fault hook given (check-port --lose-commit-reply MODULE:HOOK)")
    ref = subject.ref("lost")
    records = subject.make(3)
    with subject.lose_commit_reply(subject.port), _session(subject) as session:
        session.begin(ref, subject.target)
        session.add(records)
        silent = "a lost COMMIT reply did not raise (the fault hook had no effect?)"
        _expect_raises(LegacyOutcomeUnknown, session.commit, "a lost COMMIT reply", silent)
    listed = _listed(_status(subject, ref))
    _expect(
        len(listed) == 1 and listed[0][1:] == (3, False),
        f"after a lost COMMIT reply batch_status listed {listed}; the commit had been applied",
    )
    subject.port.void_batch(listed[0][0])


def _expect_transient(call: Callable[[], object], what: str) -> None:
    """While the system is down ``call`` must raise LegacyTransient: an answer would be believed."""
    try:
        answer = call()
    except LegacyTransient:
        return
    except Exception as exc:
        raise ContractViolation(
            f"{what} while the system was down raised {type(exc).__name__}, not LegacyTransient"
        ) from exc
    shown = _listed(answer) if isinstance(answer, BatchStatus) else type(answer).__name__
    raise ContractViolation(
        f"{what} answered {shown} while the system was down; it must raise LegacyTransient "
        '(an empty answer is taken to mean "nothing was committed": the reconciler would reopen a '
        "commit that landed)"
    )


def outage_raises_transient(subject: ContractSubject) -> None:
    if subject.system_down is None:
        raise RuleSkipped("no outage hook given (check-port --system-down MODULE:HOOK)")
    ref = subject.ref("outage")
    batch = _commit(subject, ref, subject.make(2))

    def begin() -> None:
        with _session(subject) as session:
            session.begin(subject.ref("outage-begin"), subject.target)

    with subject.system_down(subject.port):
        _expect_transient(lambda: subject.port.batch_status(ref), "batch_status")
        _expect_transient(
            lambda: subject.port.batch_status("readiness-probe"), "batch_status('readiness-probe')"
        )
        _expect_transient(begin, "open_session() and begin()")
        _expect_transient(lambda: subject.port.void_batch(batch.legacy_batch_id), "void_batch")
    listed = _listed(_status(subject, ref))
    expected = [(batch.legacy_batch_id, 2, False)]
    _expect(listed == expected, f"after the outage batch_status listed {listed}, expected {expected}")
    subject.port.void_batch(batch.legacy_batch_id)


RULES: tuple[Rule, ...] = (
    Rule("protocols", "the port and its sessions satisfy the protocols; targets compile", protocols),
    Rule("session_commits", "begin, add (twice), commit: one batch, listed by batch_status", session_commits),
    Rule(
        "session_rolls_back",
        "rollback and an abandoned session leave nothing; the reference can be used again",
        session_rolls_back,
    ),
    Rule("refusals_raise_failed", "refused commands raise LegacyFailed", refusals_raise_failed),
    Rule(
        "batch_status_is_exact",
        "batch_status lists every committed batch under a reference, voided flagged, nothing else",
        batch_status_is_exact,
    ),
    Rule("void_is_idempotent", "void_batch twice: the second answers already_voided", void_is_idempotent),
    Rule(
        "concurrent_sessions",
        f"{THREADS} sessions in {THREADS} threads at once, each its own batch",
        concurrent_sessions,
    ),
    Rule(
        "readiness_is_fast",
        f"batch_status('readiness-probe') answers within {READINESS_BUDGET_SECONDS:g}s",
        readiness_is_fast,
    ),
    Rule(
        "lost_commit_reply_is_unknown",
        "a lost COMMIT reply raises LegacyOutcomeUnknown; batch_status then shows the batch",
        lost_commit_reply_is_unknown,
    ),
    Rule(
        "outage_raises_transient",
        "with the system down, batch_status, begin and void_batch raise LegacyTransient, never answer",
        outage_raises_transient,
    ),
)


def run_rule(rule: Rule, subject: ContractSubject) -> RuleResult:
    started = time.perf_counter()
    try:
        rule.check(subject)
    except RuleSkipped as exc:
        return RuleResult(rule.name, rule.description, "skip", str(exc), time.perf_counter() - started)
    except ContractViolation as exc:
        return RuleResult(rule.name, rule.description, "fail", str(exc), time.perf_counter() - started)
    except Exception as exc:  # the port raised something the rule did not expect
        detail = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
        if isinstance(exc, LegacyFailed) and subject.records is None and not subject.samples:
            detail += (
                "\n      (the records were generated from the target's schema; if the system refused"
                " them for a value it needs, such as a foreign key, give sample records:"
                " check-port --records FILE.json, in pytest a contract_samples fixture)"
            )
        return RuleResult(rule.name, rule.description, "fail", detail, time.perf_counter() - started)
    return RuleResult(rule.name, rule.description, "pass", "", time.perf_counter() - started)


def run_contract(subject: ContractSubject, rules: Sequence[Rule] = RULES) -> list[RuleResult]:
    """Every rule against ``subject``, in order; one failing rule does not stop the others."""
    return [run_rule(rule, subject) for rule in rules]
