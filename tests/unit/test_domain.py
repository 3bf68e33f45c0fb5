"""Pure domain rules: handles, fingerprints, record validation and the state table."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.domain.errors import InvalidRequest, InvalidState, LimitExceeded
from adapter.domain.identity import HandleCodec, fingerprint
from adapter.domain.records import Limits, encode_batch, encode_records
from adapter.domain.states import (
    IMPORT_TRANSITIONS,
    OPERATION_AWAITING_RECONCILIATION,
    OPERATION_FINISHED,
    OPERATION_RETRYABLE,
    OPERATION_TRANSITIONS,
    OPERATION_UNRESOLVED,
    ImportState,
    OperationState,
    transition_operation,
)
from adapter.domain.vocabulary import EventKind, Finding, RecoveryPoint

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
records = st.lists(st.dictionaries(st.text(max_size=8), json_values, max_size=4), min_size=1, max_size=20)


@pytest.mark.slow
@given(records)
def test_encoded_records_decode_to_the_same_records_in_the_same_order(batch: list[dict[str, object]]) -> None:
    assert [json.loads(text) for text in encode_records(batch, Limits())] == batch


def _as_json_dumps(batch: list[dict[str, object]]) -> list[str]:
    return [json.dumps(r, separators=(",", ":"), ensure_ascii=False, allow_nan=False) for r in batch]


json_numbers = st.integers() | st.floats(allow_nan=False, allow_infinity=False)
number_records = st.lists(
    st.dictionaries(st.text(max_size=8), json_numbers | st.text(max_size=12), max_size=4), min_size=1
)


@pytest.mark.slow
@given(number_records)
def test_the_stored_text_is_byte_for_byte_what_json_dumps_writes(batch: list[dict[str, object]]) -> None:
    """The fingerprint of an add digests these texts: a replay must match across versions."""
    assert encode_records(batch, Limits()) == _as_json_dumps(batch)


def test_one_pass_gives_the_texts_their_size_and_their_digest() -> None:
    batch = [{"n": 1e-7, "s": "é"}, {"big": 10**30, "tiny": 0.00001, "x": [1.5, None, True]}, {}]
    encoded = encode_batch(batch, Limits())
    assert encoded.texts == _as_json_dumps(batch)
    assert encoded.size == sum(len(t.encode()) for t in encoded.texts)
    assert encoded.content_digest == hashlib.sha256("\n".join(encoded.texts).encode()).hexdigest()


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"x": float("nan")}, "record 1 is not valid JSON"),
        ({"x": [float("-inf")]}, "record 1 is not valid JSON"),
        ({"x": datetime(2026, 1, 1)}, "record 1 is not valid JSON"),
        ({"x": {1, 2}}, "record 1 is not valid JSON"),
        ({"x": b"bytes"}, "record 1 is not valid JSON"),
        ({"x": "\ud800"}, "record 1 contains a lone surrogate"),
        ({"\udc00": 1}, "record 1 contains a lone surrogate"),
    ],
)
def test_what_json_cannot_hold_is_refused_with_the_record_index(
    record: dict[object, object], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        encode_records([{"ok": 1}, record], Limits())


def test_python_values_json_dumps_accepts_are_written_as_it_writes_them() -> None:
    batch: list[dict[object, object]] = [{"t": (1, 2), 1: "int key", None: "null key", "s": "a NaN-e-0.0000"}]
    assert encode_records(batch, Limits()) == _as_json_dumps(batch)  # type: ignore[arg-type]


def test_limits_are_enforced_per_call_and_per_record() -> None:
    limits = Limits(max_records_per_call=2, max_record_bytes=20)
    with pytest.raises(LimitExceeded):
        encode_records([{}, {}, {}], limits)
    with pytest.raises(LimitExceeded, match="record 1"):
        encode_records([{}, {"text": "x" * 30}], limits)
    with pytest.raises(InvalidRequest, match="record 0 is not a JSON object"):
        encode_records([[1]], limits)


def test_error_messages_never_contain_record_contents() -> None:
    with pytest.raises(LimitExceeded) as caught:
        encode_records([{"secret": "s3cr3t" * 100}], Limits(max_record_bytes=100))
    assert "s3cr3t" not in str(caught.value)


def test_handles_are_deterministic_per_secret_and_distinct_across_secrets() -> None:
    one, two = HandleCodec(b"a" * 32), HandleCodec(b"b" * 32)

    assert one.handle_for("id1") == one.handle_for("id1")
    assert one.handle_for("id1") != one.handle_for("id2")
    assert one.handle_for("id1") != two.handle_for("id1")
    assert HandleCodec.looks_like_handle(one.handle_for("id1"))


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError):
        HandleCodec(b"short")


@given(st.dictionaries(st.text(max_size=5), st.integers(), max_size=5))
def test_fingerprint_ignores_key_order(payload: dict[str, int]) -> None:
    reordered = dict(reversed(list(payload.items())))
    assert fingerprint("add", payload) == fingerprint("add", reordered)
    assert fingerprint("add", payload) != fingerprint("commit", payload)


def test_every_state_has_a_transition_entry_and_final_states_have_none() -> None:
    assert set(IMPORT_TRANSITIONS) == set(ImportState)
    for final in (ImportState.ABORTED, ImportState.COMPENSATED, ImportState.EXPIRED):
        assert IMPORT_TRANSITIONS[final] == frozenset()
    # Open to committed happens only when a COMMIT reconciled as "not committed" proves to have landed.
    assert IMPORT_TRANSITIONS[ImportState.OPEN] == {
        ImportState.COMMITTING,
        ImportState.ABORTED,
        ImportState.EXPIRED,
        ImportState.COMMITTED,
    }
    assert ImportState.OPEN not in IMPORT_TRANSITIONS[ImportState.COMMITTED]


def test_every_operation_state_has_a_transition_entry_and_final_ones_have_none() -> None:
    assert set(OPERATION_TRANSITIONS) == set(OperationState)
    assert OPERATION_TRANSITIONS[OperationState.COMPENSATED] == frozenset()
    # A succeeded commit moves on only when a late COMMIT made a second batch that could not be voided.
    assert OPERATION_TRANSITIONS[OperationState.SUCCEEDED] == frozenset({OperationState.NEEDS_OPERATOR})
    # Only the reconciler's verdict or the late proof of a COMMIT may end an unknown outcome.
    assert OperationState.IN_PROGRESS not in OPERATION_TRANSITIONS[OperationState.OUTCOME_UNKNOWN]


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (OperationState.SUCCEEDED, OperationState.FAILED),
        (OperationState.OUTCOME_UNKNOWN, OperationState.IN_PROGRESS),
        (OperationState.IN_PROGRESS, OperationState.RESOLVED),
        (OperationState.COMPENSATED, OperationState.NEEDS_OPERATOR),
        (OperationState.FAILED, OperationState.FAILED),
    ],
)
def test_an_illegal_operation_transition_raises_and_changes_nothing(
    current: OperationState, target: OperationState
) -> None:
    row = SimpleNamespace(status=current.value)
    with pytest.raises(InvalidState, match=f"{current.value} cannot become {target.value}"):
        transition_operation(row, target)
    assert row.status == current.value


def test_a_legal_operation_transition_stores_the_plain_value() -> None:
    row = SimpleNamespace(status=OperationState.IN_PROGRESS.value)
    transition_operation(row, OperationState.OUTCOME_UNKNOWN)
    assert row.status == "outcome_unknown"


def test_the_named_state_sets_split_operations_without_overlap() -> None:
    assert set(OperationState) == OPERATION_FINISHED | OPERATION_UNRESOLVED
    assert not OPERATION_FINISHED & OPERATION_UNRESOLVED
    assert OPERATION_AWAITING_RECONCILIATION < OPERATION_UNRESOLVED
    assert OPERATION_RETRYABLE < OPERATION_FINISHED


def test_vocabulary_values_are_the_stored_strings() -> None:
    assert EventKind.for_operation(OperationState.NEEDS_OPERATOR) == "operation.needs_operator"
    assert EventKind.for_import("open") is EventKind.IMPORT_OPEN
    # Every import and operation state has its event, so a new state cannot go unrecorded.
    assert {EventKind.for_import(s) for s in ImportState} <= set(EventKind)
    assert {EventKind.for_operation(s) for s in OperationState} <= set(EventKind)
    assert json.dumps({"point": RecoveryPoint.COMMIT_SENT}) == '{"point": "commit_sent"}'
    assert f"{Finding.NOT_COMMITTED}" == "not_committed"
