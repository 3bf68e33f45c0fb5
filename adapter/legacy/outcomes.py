"""What the kit's own ports and their wrappers share about how a legacy step ends.

The simulator port and the SQL port translate different failures, but they name the steps alike, word
their refusals alike and list committed batches alike, so logs and metrics read the same whichever
system is wrapped. :func:`outcome_of` is the metrics' word for each of the port's three errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Literal

from adapter.ports.legacy import (
    BatchStatus,
    CommittedBatchInfo,
    LegacyFailed,
    LegacyOutcomeUnknown,
    LegacyTransient,
)

__all__ = ["Step", "batch_status", "closing_on_error", "outcome_of", "refused", "where"]

Step = Literal["connect", "begin", "add", "commit", "rollback", "status", "void"]

_OUTCOMES: tuple[tuple[type[Exception], str], ...] = (
    (LegacyOutcomeUnknown, "outcome_unknown"),
    (LegacyTransient, "transient"),
    (LegacyFailed, "failed"),
)


def where(step: Step, context: str = "") -> str:
    """``legacy commit (batch_ref=b-1)``: how every message of a failed step begins."""
    return f"legacy {step}" + (f" ({context})" if context else "")


def refused(step: Step, reason: str, context: str = "") -> LegacyFailed:
    """The system said no: nothing was applied and retrying will not help."""
    return LegacyFailed(f"{where(step, context)} refused: {reason}")


def batch_status(batch_ref: str, committed: Iterable[tuple[str, int, bool]]) -> BatchStatus:
    """The answer to STATUS from ``(legacy_batch_id, record_count, voided)`` of each batch, oldest first."""
    return BatchStatus(
        batch_ref=batch_ref,
        batches=tuple(CommittedBatchInfo(batch_id, count, voided) for batch_id, count, voided in committed),
    )


@contextmanager
def closing_on_error(close: Callable[[], None]) -> Iterator[None]:
    """The port contract: after any error a session is finished, so it closes before the error goes on."""
    try:
        yield
    except BaseException:
        close()
        raise


def outcome_of(exc: BaseException | None) -> str:
    """How a call ended, in the metrics' words: ``ok``, one per port error, or ``error`` for a bug."""
    if exc is None:
        return "ok"
    return next((word for kind, word in _OUTCOMES if isinstance(exc, kind)), "error")
