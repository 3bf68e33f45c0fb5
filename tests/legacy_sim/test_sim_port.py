"""``SimulatorPort``: the port contract over TCP and in-process, and its error translation."""

from __future__ import annotations

from typing import Any

import pytest

from adapter.legacy.simulator import LegacyTarget, SimulatorPort, parse_legacy_url
from adapter.ports.legacy import (
    BatchStatus,
    CommittedBatch,
    CommittedBatchInfo,
    LegacyFailed,
    LegacyOutcomeUnknown,
    LegacyPort,
    LegacySession,
    LegacyTransient,
    VoidResult,
)
from legacy_sim.client import ConnectionLostError, LegacySimError
from tests.support.wait import wait_until


def _commit(port, batch_ref: str, records) -> CommittedBatch:
    session = port.open_session()
    try:
        session.begin(batch_ref)
        session.add(records)
        return session.commit()
    finally:
        session.close()


def test_happy_path_commits_and_status_and_void_answer_port_types(port_and_engine) -> None:
    port, engine = port_and_engine
    assert isinstance(port, LegacyPort)
    session = port.open_session()
    assert isinstance(session, LegacySession)
    session.begin("job-1")
    session.add([{"n": 1}, {"n": 2}])
    session.add([{"n": 3}])
    assert session.commit() == CommittedBatch("B00000001", 3)
    session.close()
    assert port.batch_status("job-1") == BatchStatus("job-1", (CommittedBatchInfo("B00000001", 3, False),))
    assert port.batch_status("other").committed is False
    assert port.void_batch("B00000001") == VoidResult("B00000001", already_voided=False)
    assert port.void_batch("B00000001") == VoidResult("B00000001", already_voided=True)
    assert port.batch_status("job-1").batches[0].voided is True
    assert engine.committed_batches()[0]["records"] == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_rollback_leaves_nothing_committed(port_and_engine) -> None:
    port, _ = port_and_engine
    session = port.open_session()
    session.begin("job-1")
    session.add([{"n": 1}])
    session.rollback()
    session.close()
    assert port.batch_status("job-1").committed is False


def test_transient_errors_become_legacy_transient(port_and_engine) -> None:
    port, engine = port_and_engine
    engine.update_faults(error_rate=1.0)
    session = port.open_session()
    with pytest.raises(LegacyTransient) as info:
        session.begin("job-1")
    assert isinstance(info.value.__cause__, LegacySimError)
    with pytest.raises(LegacyTransient):
        port.batch_status("job-1")
    with pytest.raises(LegacyTransient):
        port.void_batch("B00000001")


def test_transient_error_on_commit_is_transient_not_unknown(port_and_engine) -> None:
    port, engine = port_and_engine
    session = port.open_session()
    session.begin("job-1")
    session.add([{"n": 1}])
    engine.update_faults(error_rate=1.0)
    with pytest.raises(LegacyTransient):
        session.commit()
    engine.update_faults(error_rate=0.0)
    assert port.batch_status("job-1").committed is False


def test_drop_after_commit_becomes_outcome_unknown_and_status_resolves_it(port_and_engine) -> None:
    port, engine = port_and_engine
    session = port.open_session()
    session.begin("job-1")
    session.add([{"n": 1}, {"n": 2}])
    engine.update_faults(drop_after_commit=1.0)
    with pytest.raises(LegacyOutcomeUnknown) as info:
        session.commit()
    assert isinstance(info.value.__cause__, ConnectionLostError)
    assert port.batch_status("job-1").batches == (CommittedBatchInfo("B00000001", 2, False),)


def test_state_errors_become_legacy_failed_and_end_the_session(port_and_engine) -> None:
    port, _ = port_and_engine
    session = port.open_session()
    with pytest.raises(LegacyFailed) as info:
        session.commit()  # no open batch
    assert isinstance(info.value.__cause__, LegacySimError) and info.value.__cause__.code == "STATE"
    with pytest.raises(LegacyTransient):
        session.begin("job-1")  # the session was discarded: nothing can be sent on it


def test_invalid_records_and_unknown_void_become_legacy_failed(port_and_engine) -> None:
    port, _ = port_and_engine
    session = port.open_session()
    session.begin("job-1")
    with pytest.raises(LegacyFailed):
        session.add([{"ok": 1}, {"bad": object()}])
    with pytest.raises(LegacyFailed):
        port.void_batch("B00000077")
    with pytest.raises(LegacyFailed):
        port.open_session().begin("not a valid ref")


def test_server_down_becomes_legacy_transient(server_factory) -> None:
    server = server_factory()
    port = SimulatorPort.tcp(*server.address, timeout=1.0)
    server.close()
    with pytest.raises(LegacyTransient):
        port.open_session()
    with pytest.raises(LegacyTransient):
        port.batch_status("job-1")
    with pytest.raises(LegacyTransient):
        port.void_batch("B00000001")


def dropped_session(server_factory: Any) -> tuple[SimulatorPort, LegacySession]:
    """A port and a begun session whose connection the simulator's idle timeout has dropped."""
    server = server_factory(idle_timeout=0.2)
    port = SimulatorPort.tcp(*server.address, timeout=2.0)
    session = port.open_session()
    session.begin("job-1")
    wait_until(lambda: server.open_connections == 0, what="the idle connection to be dropped")
    return port, session


def test_connection_lost_before_commit_is_transient(server_factory) -> None:
    _, session = dropped_session(server_factory)
    with pytest.raises(LegacyTransient):
        session.add([{"n": 1}])


def test_lost_commit_reply_over_tcp_is_outcome_unknown(server_factory) -> None:
    port, session = dropped_session(server_factory)
    with pytest.raises(LegacyOutcomeUnknown):
        session.commit()
    assert port.batch_status("job-1").committed is False  # reconciliation answers the question


def test_in_process_idle_timeout_behaves_like_tcp(engine_factory, fake_clock) -> None:
    engine = engine_factory(clock=fake_clock, idle_timeout=5.0)
    port = SimulatorPort.in_process(engine)
    session = port.open_session()
    session.begin("job-1")
    fake_clock.advance(6.0)
    with pytest.raises(LegacyOutcomeUnknown):
        session.commit()
    other = port.open_session()
    other.begin("job-2")
    fake_clock.advance(6.0)
    with pytest.raises(LegacyTransient):
        other.add([{"n": 1}])
    assert port.batch_status("job-1").committed is False


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("embedded", LegacyTarget("embedded")),
        (" embedded ", LegacyTarget("embedded")),
        ("tcp://127.0.0.1:7400", LegacyTarget("tcp", "127.0.0.1", 7400)),
        ("tcp://legacy.internal:9", LegacyTarget("tcp", "legacy.internal", 9)),
        ("tcp://[::1]:7400", LegacyTarget("tcp", "::1", 7400)),
    ],
)
def test_parse_legacy_url_accepts_embedded_and_tcp(url: str, expected: LegacyTarget) -> None:
    assert parse_legacy_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "",
        "http://h:1",
        "tcp://h",
        "tcp://:7400",
        "tcp://h:0",
        "tcp://h:99999",
        "tcp://h:x",
        "tcp://h:1/db",
        "emb",
    ],
)
def test_parse_legacy_url_rejects_anything_else_with_a_clear_message(url: str) -> None:
    with pytest.raises(ValueError, match="legacy URL"):
        parse_legacy_url(url)


def test_from_url_builds_working_ports(tmp_path, sim_server) -> None:
    host, port_number = sim_server.address
    assert _commit(SimulatorPort.from_url(f"tcp://{host}:{port_number}"), "r1", [{"n": 1}]).record_count == 1
    embedded = SimulatorPort.from_url("embedded", embedded_db_path=tmp_path / "embedded.db")
    try:
        assert _commit(embedded, "r1", [{"n": 1}, {"n": 2}]) == CommittedBatch("B00000001", 2)
    finally:
        embedded.close()
    with pytest.raises(ValueError, match="database path"):
        SimulatorPort.from_url("embedded")
