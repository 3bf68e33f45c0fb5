"""Targets in the service layer: begin refuses an unknown target, add checks every record first."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from adapter.domain.errors import LimitExceeded
from adapter.domain.identity import Principal
from adapter.ports.legacy import Target
from adapter.ports.targets import begin_batch
from adapter.services import ImportService, ServiceContext
from adapter.services.targets import RecordInvalid, TargetRules, UnknownTarget


class Customer(BaseModel):
    """A customer of the ERP."""

    model_config = ConfigDict(extra="forbid")
    name: str
    age: int | None = None


@pytest.fixture
def targeted(ctx: ServiceContext) -> ImportService:
    ctx.targets = TargetRules(
        [Target.from_model("customers", Customer), Target("notes", "free text", max_records=3)]
    )
    return ImportService(ctx)


def test_begin_refuses_a_target_the_port_does_not_declare(targeted: ImportService, alice: Principal) -> None:
    with pytest.raises(UnknownTarget) as refused:
        targeted.begin(alice, "suppliers", idempotency_key="k1")
    assert refused.value.code == "unknown_target"
    assert "customers, notes" in refused.value.message
    assert targeted.list_imports(alice, cursor=None, limit=10).items == ()  # nothing stored
    assert targeted.begin(alice, "customers", idempotency_key="k1").target == "customers"  # key unused


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"age": 3}, "record 2: field 'name' is required"),
        ({"name": 7}, "record 2: field 'name' must be of type string"),
        ({"name": "x", "age": "old"}, "record 2: field 'age' breaks the schema rule 'anyOf'"),
        ({"name": "x", "vip": True}, "record 2: the record has fields the target does not know: vip"),
    ],
)
def test_add_names_the_record_and_field_and_stages_nothing(
    targeted: ImportService, alice: Principal, bad: dict[str, object], message: str
) -> None:
    handle = targeted.begin(alice, "customers").handle
    with pytest.raises(RecordInvalid) as refused:
        targeted.add(alice, handle, [{"name": "Ada"}, {"name": "Grace", "age": 85}, bad])
    assert refused.value.message == message
    assert refused.value.index == 2
    assert "old" not in refused.value.message and "7" not in refused.value.message  # no values echoed
    assert targeted.status(alice, handle).record_count == 0
    assert targeted.add(alice, handle, [{"name": "Ada"}]).record_count == 1


def test_a_target_limit_counts_what_is_already_staged(targeted: ImportService, alice: Principal) -> None:
    handle = targeted.begin(alice, "notes").handle
    targeted.add(alice, handle, [{"text": "a"}, {"text": "b"}])
    with pytest.raises(LimitExceeded):
        targeted.add(alice, handle, [{"text": "c"}, {"text": "d"}])
    assert targeted.add(alice, handle, [{"text": "c"}]).record_count == 3


def test_a_port_without_targets_accepts_any_target_and_any_object(
    service: ImportService, alice: Principal
) -> None:
    handle = service.begin(alice, "anything-at-all").handle
    assert service.add(alice, handle, [{"whatever": [1, {"x": None}]}]).record_count == 1


class _FirstVersionSession:
    """A session written before targets existed: ``begin(batch_ref)`` only."""

    def __init__(self) -> None:
        self.begun: list[str] = []

    def begin(self, batch_ref: str) -> None:
        self.begun.append(batch_ref)


class _CurrentSession:
    def __init__(self) -> None:
        self.begun: list[tuple[str, str]] = []

    def begin(self, batch_ref: str, target: str) -> None:
        self.begun.append((batch_ref, target))


def test_a_session_of_the_first_protocol_version_still_begins() -> None:
    old, new = _FirstVersionSession(), _CurrentSession()

    begin_batch(old, "adp-1", "customers")  # type: ignore[arg-type]
    begin_batch(new, "adp-2", "customers")  # type: ignore[arg-type]

    assert old.begun == ["adp-1"]
    assert new.begun == [("adp-2", "customers")]


_CHUNKS = "SELECT import_id, first_seq, last_seq, data FROM staged_chunks ORDER BY last_seq"


def _written(ctx: ServiceContext) -> dict[str, list[tuple[object, ...]]]:
    """Every staged record, operation result and event the store holds (both databases)."""
    from sqlalchemy import text

    with ctx.store.unit_of_work() as uow:
        run = uow.session.execute
        return {
            "records": [tuple(r) for r in run(text(_CHUNKS))],
            "operations": [
                tuple(r) for r in run(text("SELECT kind, status, result FROM operations ORDER BY created_at"))
            ],
            "events": [tuple(r) for r in run(text("SELECT kind, state, detail FROM events ORDER BY id"))],
        }


def test_a_refused_add_writes_nothing_and_an_accepted_one_writes_its_records_operation_and_events(
    targeted: ImportService, alice: Principal
) -> None:
    """On PostgreSQL an add is one statement that writes before the rules run (a refusal rolls it
    back); on SQLite the rules run first. Both must leave the same rows."""
    import json

    handle = targeted.begin(alice, "customers").handle
    targeted.add(alice, handle, [{"name": "Ada"}])
    before = _written(targeted.ctx)
    with pytest.raises(RecordInvalid):
        targeted.add(alice, handle, [{"name": "Grace"}, {"name": 7}])
    assert _written(targeted.ctx) == before

    targeted.add(alice, handle, [{"name": "Grace"}, {"name": "Linus"}])
    after = _written(targeted.ctx)
    assert [(first, last, str(data).split("\n")) for _, first, last, data in after["records"]] == [
        (1, 1, ['{"name":"Ada"}']),
        (2, 3, ['{"name":"Grace"}', '{"name":"Linus"}']),
    ]
    decoded = [
        (kind, status, json.loads(result) if isinstance(result, str) else result)
        for kind, status, result in after["operations"]
    ]
    assert decoded[-1] == ("add", "succeeded", {"accepted": 2, "record_count": 3, "first_seq": 2})
    events = [
        (kind, state, json.loads(detail) if isinstance(detail, str) else detail)
        for kind, state, detail in after["events"]
    ][len(before["events"]) :]
    assert events == [
        ("import.records_staged", "open", {"accepted": 2, "record_count": 3}),
        ("operation.succeeded", "succeeded", {"kind": "add"}),
    ]
