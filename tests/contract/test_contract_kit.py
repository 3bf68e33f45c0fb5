"""The contract kit points the way: records it cannot generate name the fix, sample records (from a
file or a fixture) fill in what the schema cannot say, and a refused generated record says so."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from adapter.legacy.forwarding import ForwardingPort, ForwardingSession
from adapter.legacy.simulator import SimulatorPort
from adapter.ports.legacy import LegacyRefused, LegacySession, Record, Refusal, Target
from adapter.testing.contract import ContractSubject, run_contract

NUMBERED = Target(
    "customers",
    "customers with a number the generator cannot invent",
    {
        "type": "object",
        "properties": {"number": {"type": "string", "pattern": "^C[0-9]{1,9}$"}, "name": {"type": "string"}},
        "required": ["number", "name"],
        "additionalProperties": False,
    },
)


class NumberedPort(ForwardingPort):
    """The simulator behind a target whose ``number`` follows a pattern without examples."""

    def targets(self) -> list[Target]:
        return [NUMBERED]


class RefusingSession(ForwardingSession):
    def add(self, records: Sequence[Record]) -> None:
        raise LegacyRefused(
            Refusal("foreign_key_violation", "no such customer", position=0, field="customer")
        )


class RefusingPort(ForwardingPort):
    """The simulator's own (permissive) target; every batch refused like a missing foreign key."""

    def open_session(self) -> LegacySession:
        return RefusingSession(super().open_session())


@pytest.fixture
def simulator(tmp_path: Path) -> Iterator[SimulatorPort]:
    port = SimulatorPort.from_url("embedded", embedded_db_path=tmp_path / "legacy.db")
    yield port
    port.close()


def test_a_pattern_without_examples_names_the_fix(simulator: SimulatorPort) -> None:
    results = {r.rule: r for r in run_contract(ContractSubject(NumberedPort(simulator)))}

    detail = results["protocols"].detail
    assert results["protocols"].status == "fail"
    assert "record 0: field 'number' breaks the schema rule 'pattern'" in detail
    assert "Field(examples=[...])" in detail and "--records FILE.json" in detail
    assert "contract_samples" in detail


def test_sample_records_fill_in_what_the_generator_cannot(simulator: SimulatorPort) -> None:
    subject = ContractSubject(NumberedPort(simulator), samples=[{"number": "C1"}, {"number": "C2"}])

    made = subject.make(3)
    results = run_contract(subject)

    assert [r["number"] for r in made] == ["C1", "C2", "C1"] and all(r["name"] for r in made)
    assert {r.rule for r in results if r.status == "fail"} == set()


def test_a_refused_generated_record_suggests_sample_records(simulator: SimulatorPort) -> None:
    generated = {r.rule: r for r in run_contract(ContractSubject(RefusingPort(simulator)))}
    sampled = {r.rule: r for r in run_contract(ContractSubject(RefusingPort(simulator), samples=[{"n": 1}]))}

    assert generated["session_commits"].status == "fail"
    assert "record 0, field 'customer': foreign_key_violation" in generated["session_commits"].detail
    assert "give sample records: check-port --records FILE.json" in generated["session_commits"].detail
    assert sampled["session_commits"].status == "fail"
    assert "give sample records" not in sampled["session_commits"].detail
