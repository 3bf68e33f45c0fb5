"""Fault injection: latency, seeded transient errors, drop-after-commit, and knobs changed at run time."""

from __future__ import annotations

import time

import pytest

from legacy_sim.client import ConnectionLostError, LegacySimError
from legacy_sim.faults import Faults
from legacy_sim.inprocess import InProcessClient


def _outcomes(client, n: int = 40) -> list[bool]:
    """True where STATUS failed with TRANSIENT."""
    result = []
    for _ in range(n):
        try:
            client.status("probe")
            result.append(False)
        except LegacySimError as exc:
            assert exc.code == "TRANSIENT"
            result.append(True)
    return result


def test_latency_delays_every_command(backend) -> None:
    client = backend.connect()
    client.faults(latency_ms=80)
    started = time.monotonic()
    client.ping()
    client.status("r")
    elapsed = time.monotonic() - started
    assert 0.15 <= elapsed < 2.0


def test_error_rate_one_fails_every_command_and_applies_nothing(backend) -> None:
    client = backend.connect()
    client.faults(error_rate=1.0)
    for call in (
        lambda: client.begin("r1"),
        lambda: client.add({"n": 1}),
        lambda: client.commit(),
        lambda: client.rollback(),
        lambda: client.status("r1"),
        lambda: client.void("B00000001"),
    ):
        with pytest.raises(LegacySimError) as info:
            call()
        assert info.value.code == "TRANSIENT"
    assert client.ping() == {"pong": True}  # PING and FAULTS are exempt
    client.faults(error_rate=0.0)
    with pytest.raises(LegacySimError) as info:
        client.commit()  # the BEGIN above was never applied
    assert info.value.code == "STATE"
    assert client.status("r1")["committed"] is False


def test_seeded_error_rate_is_reproducible(backend, engine_factory) -> None:
    client = backend.connect()
    client.faults(error_rate=0.5, seed=1234)
    first = _outcomes(client)
    client.faults(seed=1234)  # re-seeding restarts the dice
    assert _outcomes(client) == first
    assert any(first) and not all(first)
    fresh = InProcessClient(engine_factory("other.db", faults=Faults(error_rate=0.5, seed=1234)))
    assert _outcomes(fresh) == first


def test_drop_after_commit_applies_the_commit_but_loses_the_reply(backend) -> None:
    client = backend.connect()
    client.begin("r1")
    client.add_many([{"n": 1}, {"n": 2}])
    client.faults(drop_after_commit=1.0)
    with pytest.raises(ConnectionLostError) as info:
        client.commit()
    assert info.value.request_sent
    with pytest.raises(ConnectionLostError):
        client.ping()  # the connection is gone for good
    status = backend.connect().status("r1")
    assert status["batches"] == [{"legacy_batch_id": "B00000001", "record_count": 2, "voided": False}]


def test_faults_command_changes_knobs_at_run_time_and_answers_them(backend) -> None:
    client = backend.connect()
    assert client.faults() == {"latency_ms": 0, "error_rate": 0.0, "drop_after_commit": 0.0, "seed": None}
    answer = client.faults(error_rate=1.0, seed=7)
    assert answer["error_rate"] == 1.0 and answer["seed"] == 7
    assert backend.engine.faults.error_rate == 1.0  # shared by every session of the engine
    with pytest.raises(LegacySimError):
        backend.connect().status("r")
    backend.engine.update_faults(error_rate=0.0)  # the in-process knob
    assert client.status("r")["committed"] is False


@pytest.mark.parametrize(
    "knobs", [{"error_rate": 1.5}, {"latency_ms": -1}, {"drop_after_commit": "yes"}, {"bogus": 1}]
)
def test_bad_fault_knobs_are_invalid_and_change_nothing(backend, knobs) -> None:
    client = backend.connect()
    with pytest.raises(LegacySimError) as info:
        client.faults(**knobs)
    assert info.value.code == "INVALID"
    assert client.faults()["error_rate"] == 0.0
