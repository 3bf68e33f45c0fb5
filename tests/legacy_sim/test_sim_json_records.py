"""Records as JSON texts: the clients' ``add_many_json`` and the port session's ``add_json``."""

from __future__ import annotations

import json

import pytest

from adapter.ports.legacy import JsonRecordSession, LegacyFailed
from legacy_sim.client import LegacySimError
from legacy_sim.protocol import INVALID

RECORDS = [{"id": i, "name": f"naïve {i}", "tags": ["a", "b"], "price": 1.5 * i} for i in range(1100)]
TEXTS = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in RECORDS]


def test_texts_land_as_the_records_they_encode(backend) -> None:
    client = backend.connect()
    client.begin("json-1")
    assert client.add_many_json(TEXTS) == len(TEXTS)  # more than one pipeline window
    client.commit()
    [batch] = backend.engine.committed_batches()
    assert batch["records"] == RECORDS


@pytest.mark.parametrize("bad", ['{"a":1}\n{"b":2}', '{"a":1}\rX', "x\n"])
def test_a_text_with_a_line_break_is_refused_before_anything_is_sent(backend, bad: str) -> None:
    client = backend.connect()
    client.begin("json-2")
    with pytest.raises(LegacySimError) as caught:
        client.add_many_json(['{"ok":true}', bad])
    assert caught.value.code == INVALID
    client.add_many_json(['{"ok":true}'])  # the session is still usable: nothing was sent
    assert client.commit()["record_count"] == 1


def test_a_text_that_is_not_an_object_fails_with_its_index(backend) -> None:
    client = backend.connect()
    client.begin("json-3")
    with pytest.raises(LegacySimError) as caught:
        client.add_many_json(['{"ok":true}', "[1,2]", "not json"])
    assert caught.value.code == INVALID and caught.value.index == 1


def test_the_port_session_takes_json_texts(port_and_engine) -> None:
    port, engine = port_and_engine
    session = port.open_session()
    assert isinstance(session, JsonRecordSession)
    try:
        session.begin("json-4", "")
        session.add_json(TEXTS[:10])
        session.add(RECORDS[10:20])
        session.commit()
    finally:
        session.close()
    [batch] = engine.committed_batches()
    assert batch["records"] == RECORDS[:20]


def test_a_refused_text_is_legacy_failed_and_ends_the_session(port_and_engine) -> None:
    port, _ = port_and_engine
    session = port.open_session()
    session.begin("json-5", "")
    with pytest.raises(LegacyFailed):
        session.add_json(["[]"])
    session.close()
