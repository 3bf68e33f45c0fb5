"""``python -m legacy_sim``: serve survives restarts on the same --db; dump prints committed batches."""

from __future__ import annotations

import json

from legacy_sim.client import LegacyClient
from legacy_sim.inprocess import InProcessClient


def test_status_finds_a_committed_batch_after_the_server_process_restarts(
    tmp_path, sim_process_factory
) -> None:
    db = tmp_path / "legacy.db"
    first = sim_process_factory(db)
    with LegacyClient(first.host, first.port, timeout=5.0) as client:
        client.begin("job-42")
        client.add_many([{"n": 1}, {"n": 2}, {"n": 3}])
        committed = client.commit()
        client.begin("lost-on-restart")
        client.add({"n": 9})
        first.proc.kill()  # no graceful shutdown: durability comes from the committed transaction
        first.stop()

    second = sim_process_factory(db)
    with LegacyClient(second.host, second.port, timeout=5.0) as client:
        status = client.status("job-42")
        assert status["batches"] == [
            {"legacy_batch_id": committed["legacy_batch_id"], "record_count": 3, "voided": False}
        ]
        assert client.status("lost-on-restart")["committed"] is False
        client.begin("job-43")
        assert client.commit()["legacy_batch_id"] == "B00000002"  # ids keep counting
    assert second.stop() == 0  # SIGTERM is a clean exit


def test_serve_flags_set_the_fault_knobs(tmp_path, sim_process_factory) -> None:
    process = sim_process_factory(
        tmp_path / "legacy.db",
        "--drop-after-commit",
        "--latency-ms",
        "5",
        "--seed",
        "3",
        "--idle-timeout",
        "9",
    )
    with LegacyClient(process.host, process.port, timeout=5.0) as client:
        assert client.faults() == {"latency_ms": 5.0, "error_rate": 0.0, "drop_after_commit": 1.0, "seed": 3}


def test_dump_prints_one_json_line_per_committed_batch_with_records_in_order(
    tmp_path, engine_factory, run_legacy_sim
) -> None:
    engine = engine_factory("dump.db")
    client = InProcessClient(engine)
    client.begin("a")
    client.add_many([{"i": 3}, {"i": 1}, {"i": 2}])
    first = client.commit()["legacy_batch_id"]
    client.begin("b")
    client.add({"name": "Zoë"})
    client.commit()
    client.begin("uncommitted")
    client.add({"i": 0})
    client.void(first)

    result = run_legacy_sim("dump", "--db", str(tmp_path / "dump.db"))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines == [
        {
            "legacy_batch_id": "B00000001",
            "batch_ref": "a",
            "record_count": 3,
            "records": [{"i": 3}, {"i": 1}, {"i": 2}],
            "voided": True,
        },
        {
            "legacy_batch_id": "B00000002",
            "batch_ref": "b",
            "record_count": 1,
            "records": [{"name": "Zoë"}],
            "voided": False,
        },
    ]


def test_dump_of_a_missing_database_fails_without_creating_it(tmp_path, run_legacy_sim) -> None:
    result = run_legacy_sim("dump", "--db", str(tmp_path / "missing.db"))
    assert result.returncode == 1 and "no database" in result.stderr
    assert not (tmp_path / "missing.db").exists()
