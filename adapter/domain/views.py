"""What the service layer returns: plain, immutable values that every entry point can render."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = [
    "AbortResult",
    "AddResult",
    "BeginResult",
    "CommitResult",
    "HistoryEntry",
    "ImportView",
    "OperationSummary",
    "OperationView",
    "ReplaceResult",
]


@dataclass(frozen=True, slots=True)
class BeginResult:
    handle: str
    import_id: str
    status: str
    target: str
    expires_at: datetime
    record_count: int
    replayed: bool


@dataclass(frozen=True, slots=True)
class AddResult:
    handle: str
    accepted: int
    record_count: int
    replayed: bool


@dataclass(frozen=True, slots=True)
class CommitResult:
    """Outcome of a commit request.

    ``status`` is one of committed, in_progress, outcome_unknown, cancelled, failed. ``failed``
    only ever means COMMIT was never sent (so nothing was applied); ``error`` then says why.
    """

    handle: str
    status: str
    operation_id: str | None
    legacy_batch_id: str | None
    record_count: int
    replayed: bool
    error: str | None = None
    records_sent: int | None = None
    """While ``in_progress``: how many records the legacy system has taken so far."""
    refusal: dict[str, Any] | None = None
    """``failed`` because the system refused, with its reason (``code``, ``message``, ``position``,
    ``field``: the port's ``Refusal``, which holds no record contents)."""


@dataclass(frozen=True, slots=True)
class ReplaceResult:
    """What ``replace_records`` answers: how many records were replaced, and the import's count."""

    handle: str
    replaced: int
    record_count: int
    replayed: bool


@dataclass(frozen=True, slots=True)
class AbortResult:
    """What abort answers: the import's handle and the state the abort left it in (a committed import
    is compensated, so its state then says how far the compensation got)."""

    handle: str
    status: str
    abort_requested: bool = False
    """The import was still committing: the abort is recorded and takes effect when the commit ends."""


@dataclass(frozen=True, slots=True)
class OperationSummary:
    operation_id: str
    kind: str
    status: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ImportView:
    handle: str
    import_id: str
    target: str
    status: str
    record_count: int
    expires_at: datetime
    created_at: datetime
    updated_at: datetime
    legacy_batch_id: str | None
    operations: tuple[OperationSummary, ...] = ()
    """The latest operations (``STATUS_OPERATIONS`` in ``store/reads.py``), oldest first."""
    earlier_operations: bool = False
    """The import has older operations than those shown (found by id or key)."""


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One step of an operation's history (from the event table): no contents, only facts."""

    at: datetime
    event: str
    state: str | None
    detail: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class OperationView:
    operation_id: str
    kind: str
    status: str
    import_id: str | None
    recovery_point: str | None
    attempts: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    history: tuple[HistoryEntry, ...] = field(default=())
    records_sent: int | None = None
    """A running commit's progress (live on the worker that runs it, else as of its last lease renewal)."""
    record_count: int | None = None
    """A commit's record total (the import's count), so progress reads as "n of N"."""
    stop_requested: str | None = None
