"""Tool inputs and outputs: the published contract (inputSchema / outputSchema) of every tool.

Inputs forbid unknown fields so a typo is an error, not a silently ignored argument.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from adapter.domain.confirmation import TARGET_PATTERN

__all__ = [
    "AbortImportIn",
    "AbortImportOut",
    "AddRecordIn",
    "AddRecordOut",
    "AddRecordsIn",
    "AddRecordsOut",
    "BeginImportIn",
    "BeginImportOut",
    "CommitImportIn",
    "CommitImportOut",
    "GetImportStatusIn",
    "GetOperationStatusIn",
    "ImportStatusOut",
    "OperationStatusOut",
    "ReplaceRecordsIn",
    "ReplaceRecordsOut",
]

Handle = Field(description="The import handle returned by begin_import.", min_length=1, max_length=100)
IdempotencyKey = Field(
    default=None,
    description="Optional. Retrying with the same key returns the first result instead of acting twice.",
    min_length=1,
    max_length=200,
)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BeginImportIn(_In):
    target: str = Field(
        description="Where the records go in the legacy system, e.g. 'customers': an identifier of ASCII "
        "letters and digits, then also _ . : / - (it is shown to the user when a commit is confirmed).",
        min_length=1,
        max_length=200,
        pattern=TARGET_PATTERN,
    )
    idempotency_key: str | None = IdempotencyKey
    # strict: "10" is not a number of seconds (the published schema says integer; lax parsing took it)
    ttl_seconds: int | None = Field(
        default=None, strict=True, description="How long the handle stays usable while open."
    )


class BeginImportOut(BaseModel):
    handle: str
    status: Literal["open"]
    target: str
    expires_at: datetime
    record_count: int
    replayed: bool


class AddRecordIn(_In):
    handle: str = Handle
    record: dict[str, Any] = Field(description="One record: a JSON object.")
    idempotency_key: str | None = IdempotencyKey


class AddRecordOut(BaseModel):
    handle: str
    record_count: int
    replayed: bool


# The published schema says "a list of objects"; the model checks only the list (its length): each
# record is checked once, by the service, which names a record that is not an object by its index.
# Validating dict[str, Any] here copied every record for nothing (0.45 ms of event-loop CPU per
# 500-record call).
Records = Annotated[
    list[Any],
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "object", "additionalProperties": True},
            "minItems": 1,
            "maxItems": 1000,
        }
    ),
]


class AddRecordsIn(_In):
    handle: str = Handle
    records: Records = Field(
        description="1 to 1000 records, staged in this order.", min_length=1, max_length=1000
    )
    idempotency_key: str | None = IdempotencyKey


class AddRecordsOut(BaseModel):
    handle: str
    accepted: int
    record_count: int
    replayed: bool


class Replacement(_In):
    position: int = Field(description="Which staged record, counted from 0 (as refusals name it).", ge=0)
    record: dict[str, Any] = Field(description="The record to stage in its place: a JSON object.")


class ReplaceRecordsIn(_In):
    handle: str = Handle
    records: list[Replacement] = Field(
        description="1 to 1000 replacements, each a position and the record to put there.",
        min_length=1,
        max_length=1000,
    )
    idempotency_key: str | None = IdempotencyKey


class ReplaceRecordsOut(BaseModel):
    handle: str
    replaced: int
    record_count: int
    replayed: bool


class CommitImportIn(_In):
    handle: str = Handle
    idempotency_key: str | None = IdempotencyKey


CommitStatus = Literal["committed", "in_progress", "outcome_unknown", "cancelled", "declined"]


class CommitImportOut(BaseModel):
    handle: str
    status: CommitStatus
    operation_id: str | None
    legacy_batch_id: str | None
    record_count: int
    replayed: bool
    records_sent: int | None = None
    """While ``in_progress``: the records the legacy system has taken so far."""
    message: str | None = None
    """What to do next, in words, when the answer is not final (in_progress, outcome_unknown, ...)."""


class AbortImportIn(_In):
    handle: str = Handle


class AbortImportOut(BaseModel):
    handle: str
    status: str
    """The import's state afterwards (``declined``: the user said no to a void; nothing changed)."""
    abort_requested: bool = False
    """The import was committing: the abort takes effect when the commit ends (see ``message``)."""
    message: str | None = None


WaitSeconds = Field(
    default=None,
    description="Optional. Wait up to this many seconds (capped by the server's wait budget) and answer as "
    "soon as the status changes, instead of at once.",
    ge=0,
    le=60,
)


class GetImportStatusIn(_In):
    handle: str = Handle
    wait_seconds: float | None = WaitSeconds


class OperationSummaryOut(BaseModel):
    operation_id: str
    kind: str
    status: str
    created_at: datetime


class ImportStatusOut(BaseModel):
    handle: str
    import_id: str
    status: str
    target: str
    record_count: int
    expires_at: datetime
    operations: list[OperationSummaryOut] = Field(
        description="The import's latest operations (at most 20), oldest first."
    )
    earlier_operations: bool = Field(
        default=False,
        description="The import has older operations than those listed (find one by id or key).",
    )


class GetOperationStatusIn(_In):
    operation_id: str | None = Field(
        default=None, description="The operation id from a tool result.", max_length=64
    )
    idempotency_key: str | None = Field(
        default=None, description="The idempotency key the call used.", max_length=200
    )
    wait_seconds: float | None = WaitSeconds


class HistoryEntryOut(BaseModel):
    at: datetime
    event: str
    state: str | None
    detail: dict[str, Any] | None


class OperationStatusOut(BaseModel):
    operation_id: str
    kind: str
    status: str
    result: dict[str, Any] | None
    error: dict[str, Any] | None = None
    """Why it failed (``code``; for a refusal also ``refusal``: code, message, position, field)."""
    records_sent: int | None = None
    """While a commit is ``in_progress``: the records the legacy system has taken so far."""
    record_count: int | None = None
    """A commit's record total."""
    history: list[HistoryEntryOut]
