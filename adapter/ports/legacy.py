"""The legacy port: the only way the kit talks to the wrapped system.

A wrapped system is stateful: a *session* opens one batch under a reference, receives records and
commits or rolls back. The kit never imports a concrete system; it receives an object that satisfies
:class:`LegacyPort` from the wiring (``adapter.bootstrap``). The simulator client in
``adapter.legacy.simulator`` is the reference implementation; ``docs/wrap-your-own-system.md`` shows
how to write another.

Errors are the contract that makes safe retries possible, so every implementation must translate its
own failures into exactly one of these three:

* :class:`LegacyFailed`: the system refused the command; nothing was applied, retrying will not help.
* :class:`LegacyTransient`: the command was not applied and may succeed if tried again.
* :class:`LegacyOutcomeUnknown`: the command may or may not have been applied (a lost reply, a
  timeout, a dropped connection after the command was sent).

After any error inside a session, the session is finished: the caller discards it and, if it retries,
starts again in a new session. Uncommitted work in a lost session is gone, which is safe, because only
``commit`` makes anything visible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BatchStatus",
    "CommittedBatch",
    "CommittedBatchInfo",
    "LegacyError",
    "LegacyFailed",
    "LegacyOutcomeUnknown",
    "LegacyPort",
    "LegacySession",
    "LegacyTransient",
    "VoidResult",
]

Record = Mapping[str, Any]


class LegacyError(Exception):
    """Base of the three outcomes a legacy call can fail with."""


class LegacyFailed(LegacyError):
    """The legacy system refused the command; nothing was applied."""


class LegacyTransient(LegacyError):
    """The command was not applied; the same work may succeed in a new attempt."""


class LegacyOutcomeUnknown(LegacyError):
    """The command was sent but its result was lost; it may have been applied."""


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """What the legacy system answered for a successful commit."""

    legacy_batch_id: str
    record_count: int


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """What the legacy system knows about a batch reference.

    ``batches`` lists every committed batch under the reference, oldest first. Because a legacy commit
    is not idempotent, more than one entry means the same work was committed twice.
    """

    batch_ref: str
    batches: tuple[CommittedBatchInfo, ...]

    @property
    def committed(self) -> bool:
        return bool(self.batches)


@dataclass(frozen=True, slots=True)
class CommittedBatchInfo:
    legacy_batch_id: str
    record_count: int
    voided: bool


@dataclass(frozen=True, slots=True)
class VoidResult:
    """Result of reversing a committed batch. ``already_voided`` makes a repeated VOID harmless."""

    legacy_batch_id: str
    already_voided: bool


@runtime_checkable
class LegacySession(Protocol):
    """One connection-bound legacy session. Not thread-safe; use from one thread at a time."""

    def begin(self, batch_ref: str) -> None:
        """Open a batch under ``batch_ref`` (an opaque, unique reference chosen by the kit)."""

    def add(self, records: Sequence[Record]) -> None:
        """Append records to the open batch, in order.

        Implementations may pipeline. If any record fails, the whole call raises and the session
        must be discarded, because the batch no longer holds a known prefix of the records.
        """

    def commit(self) -> CommittedBatch:
        """Apply the batch. The one irreversible step; a lost reply raises LegacyOutcomeUnknown."""

    def rollback(self) -> None:
        """Drop the open batch. Best effort: a lost session has dropped it already."""

    def close(self) -> None:
        """Release the connection. Uncommitted work is lost."""


@runtime_checkable
class LegacyPort(Protocol):
    """Factory for sessions plus the session-free questions reconciliation and compensation ask."""

    def open_session(self) -> LegacySession:
        """Open a new session (a new connection for connection-bound systems)."""

    def batch_status(self, batch_ref: str) -> BatchStatus:
        """Ask whether anything was committed under ``batch_ref``."""

    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        """Reverse a committed batch (the compensation). Repeating it is harmless."""
