"""The wire shapes of the admin side: the JSON API's request and response models.

One module for every reader of these shapes: the routes (``api.py``), the ops CLI's ``--json``
output (``ops_cli.py``) and the API reference at ``/docs``. It imports pydantic and the service
layer's result types only, so the CLI does not load the web stack to print them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from adapter.services.admin import OperationDetail

__all__ = [
    "NO_NUL",
    "ActionIn",
    "ActionOut",
    "AuditOut",
    "AuthErrorOut",
    "CompensationOut",
    "ErrorOut",
    "ImportDetailOut",
    "ImportOut",
    "ImportPageOut",
    "LeaseOut",
    "OperationDetailOut",
    "OperationOut",
    "OperationPageOut",
    "ResolveIn",
    "StepOut",
    "operation_detail_out",
]

NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL


class ErrorOut(BaseModel):
    """A refused request: a stable machine code and a one-line message."""

    code: str = Field(description="Stable error code, e.g. `operation_not_found`, `invalid_cursor`.")
    detail: str = Field(description="What went wrong, for a person.")


class AuthErrorOut(BaseModel):
    detail: str


class _Out(BaseModel):
    """Built from the service layer's result objects with ``model_validate`` (attributes by name)."""

    model_config = ConfigDict(from_attributes=True)


class OperationOut(_Out):
    operation_id: str
    kind: str = Field(description="begin, add, commit, abort or compensate.")
    status: str = Field(description="The operation's state (see docs/state-matrix.md).")
    principal: str
    tenant: str
    import_id: str | None
    idempotency_key: str | None
    recovery_point: str | None = Field(description="How far a commit got (e.g. `replaying`, `commit_sent`).")
    attempts: int
    created_at: datetime
    updated_at: datetime


class ImportOut(_Out):
    import_id: str
    principal: str
    tenant: str
    target: str
    status: str = Field(description="The import's state (see docs/state-matrix.md).")
    record_count: int
    legacy_batch_id: str | None
    expires_at: datetime
    created_at: datetime
    updated_at: datetime


class StepOut(_Out):
    at: datetime
    event: str = Field(description="What happened, e.g. `operation.reconciled`.")
    state: str | None
    detail: dict[str, Any] | None


class AuditOut(_Out):
    at: datetime = Field(description="When the action was taken.")
    actor: str = Field(
        description="Who took it: `operator`, `viewer`, `cli:<user>`, or `<role>:<sub>` for an identity "
        "provider's token."
    )
    action: str = Field(description="reconcile, compensate or resolve.")
    reason: str | None = Field(description="Why, as the operator said.")
    outcome: str = Field(description="How it ended; `refused: <Error>` when it was refused.")


class LeaseOut(BaseModel):
    owner: str | None
    expires_at: datetime | None


class CompensationOut(BaseModel):
    legacy_batch_id: str
    status: str
    reason: str | None
    attempts: int
    last_error: str | None


class OperationDetailOut(BaseModel):
    operation: OperationOut
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    batch_ref: str | None = Field(description="The reference the commit used in the legacy system.")
    lease: LeaseOut | None = Field(description="Who holds the operation now, if anyone.")
    steps: list[StepOut] = Field(description="The operation's events, oldest first.")
    compensation: CompensationOut | None
    audit: list[AuditOut] = Field(description="Every operator action on it, oldest first.")
    import_record: ImportOut | None = Field(description="The import it belongs to, by import id.")


class ImportDetailOut(BaseModel):
    import_record: ImportOut
    operations: list[OperationOut]


class OperationPageOut(_Out):
    items: list[OperationOut]
    next_cursor: str | None = Field(description="Pass as `cursor` with the same filters; null at the end.")


class ImportPageOut(_Out):
    items: list[ImportOut]
    next_cursor: str | None = Field(description="Pass as `cursor` with the same filters; null at the end.")


class ActionIn(BaseModel):
    reason: str | None = Field(
        default=None, max_length=1000, pattern=NO_NUL, description="Why (recorded in the audit)."
    )


class ResolveIn(BaseModel):
    reason: str = Field(
        min_length=1, max_length=1000, pattern=NO_NUL, description="Why it may be closed (required)."
    )


class ActionOut(_Out):
    operation_id: str
    action: str
    outcome: str = Field(description="What the action did, e.g. `reconciled: committed`, `already resolved`.")
    status: str = Field(description="The operation's status after the action.")
    detail: dict[str, Any]


def operation_detail_out(found: OperationDetail) -> OperationDetailOut:
    """The wire form of an operation's detail (shared with ``python -m adapter ops show --json``)."""
    lease = None
    if found.lease_owner is not None or found.lease_expires_at is not None:
        lease = LeaseOut(owner=found.lease_owner, expires_at=found.lease_expires_at)
    return OperationDetailOut(
        operation=OperationOut.model_validate(found.operation),
        result=found.result,
        error=found.error,
        batch_ref=found.batch_ref,
        lease=lease,
        steps=[StepOut.model_validate(step) for step in found.steps],
        compensation=CompensationOut(**found.compensation) if found.compensation else None,
        audit=[AuditOut.model_validate(entry) for entry in found.audit],
        import_record=ImportOut.model_validate(found.import_record) if found.import_record else None,
    )
