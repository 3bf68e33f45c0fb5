"""Session semantics, identical over TCP and in-process (the ``backend`` fixture runs both)."""

from __future__ import annotations

import pytest

from legacy_sim.client import LegacySimError


def test_a_batch_is_bound_to_the_connection_that_began_it(backend) -> None:
    a, b = backend.connect(), backend.connect()
    a.begin("ref-1")
    a.add({"n": 1})
    with pytest.raises(LegacySimError) as info:
        b.commit()
    assert info.value.code == "STATE"
    with pytest.raises(LegacySimError) as info:
        b.add({"n": 2})
    assert info.value.code == "STATE"
    assert b.status("ref-1")["committed"] is False
    assert a.commit() == {"legacy_batch_id": "B00000001", "record_count": 1}


def test_begin_while_a_batch_is_open_is_a_state_error(backend) -> None:
    client = backend.connect()
    client.begin("ref-1")
    with pytest.raises(LegacySimError) as info:
        client.begin("ref-2")
    assert info.value.code == "STATE"


def test_committing_the_same_content_twice_makes_two_batches(backend) -> None:
    for _ in range(2):
        client = backend.connect()
        client.begin("same-ref")
        client.add_many([{"n": 1}, {"n": 2}])
        client.commit()
    status = backend.connect().status("same-ref")
    assert status == {
        "batch_ref": "same-ref",
        "committed": True,
        "batches": [
            {"legacy_batch_id": "B00000001", "record_count": 2, "voided": False},
            {"legacy_batch_id": "B00000002", "record_count": 2, "voided": False},
        ],
    }


def test_one_session_can_commit_several_batches_in_turn(backend) -> None:
    client = backend.connect()
    client.begin("r1")
    client.add({"n": 1})
    first = client.commit()
    client.begin("r2")
    second = client.commit()
    assert (first["legacy_batch_id"], second["legacy_batch_id"]) == ("B00000001", "B00000002")
    assert second["record_count"] == 0


def test_rollback_drops_the_open_batch_and_is_harmless_without_one(backend) -> None:
    client = backend.connect()
    client.begin("ref-1")
    client.add_many([{"n": 1}, {"n": 2}])
    assert client.rollback() == {"rolled_back": True, "discarded": 2}
    assert client.rollback() == {"rolled_back": False, "discarded": 0}
    with pytest.raises(LegacySimError):
        client.commit()
    assert client.status("ref-1")["committed"] is False


def test_add_many_reads_every_reply_then_raises_the_refusal(backend) -> None:
    client = backend.connect()
    with pytest.raises(LegacySimError) as info:
        client.add_many([{"n": 1}, {"n": 2}])
    assert info.value.code == "STATE" and info.value.index == 0
    # The stream is still in step: the next command gets its own reply.
    assert client.ping() == {"pong": True}


def test_add_many_pipelines_large_batches_in_order(backend) -> None:
    client = backend.connect()
    client.begin("big")
    records = [{"i": i, "pad": "x" * 50} for i in range(1500)]
    replies = client.add_many(records)
    assert replies[-1] == {"count": 1500}
    assert client.commit()["record_count"] == 1500
    (batch,) = backend.engine.committed_batches()
    assert batch["records"] == records


def test_a_record_that_is_not_serialisable_json_is_invalid(backend) -> None:
    client = backend.connect()
    client.begin("ref-1")
    with pytest.raises(LegacySimError) as info:
        client.add({"when": object()})
    assert info.value.code == "INVALID"


def test_status_and_void_work_with_a_batch_open(backend) -> None:
    writer = backend.connect()
    writer.begin("r1")
    writer.add({"n": 1})
    committed = writer.commit()
    client = backend.connect()
    client.begin("r2")
    assert client.status("r1")["committed"] is True
    assert client.void(committed["legacy_batch_id"])["already_voided"] is False
    client.add({"n": 2})
    assert client.commit()["record_count"] == 1


def test_void_marks_the_batch_voided_and_repeating_it_is_harmless(backend) -> None:
    client = backend.connect()
    client.begin("r1")
    batch_id = client.commit()["legacy_batch_id"]
    assert client.void(batch_id) == {"legacy_batch_id": batch_id, "already_voided": False}
    assert client.void(batch_id) == {"legacy_batch_id": batch_id, "already_voided": True}
    assert client.status("r1")["batches"] == [
        {"legacy_batch_id": batch_id, "record_count": 0, "voided": True}
    ]


@pytest.mark.parametrize("batch_id", ["B00000099", "nonsense"])
def test_void_of_an_unknown_batch_is_not_found(backend, batch_id: str) -> None:
    with pytest.raises(LegacySimError) as info:
        backend.connect().void(batch_id)
    assert info.value.code == "NOT_FOUND"


def test_status_of_an_unknown_reference_shows_nothing_committed(backend) -> None:
    assert backend.connect().status("never") == {"batch_ref": "never", "committed": False, "batches": []}


def test_closing_a_session_loses_its_uncommitted_batch(backend) -> None:
    client = backend.connect()
    client.begin("r1")
    client.add({"n": 1})
    client.close()
    assert backend.connect().status("r1")["committed"] is False
    assert backend.engine.committed_batches() == []
