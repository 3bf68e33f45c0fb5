"""What the legacy system's answer about a batch reference means for the operation and the import.

One judgement, used wherever the kit learns an outcome by asking (reconciliation, and a retried
commit that asks before committing again), so both reach the same verdict.
"""

from __future__ import annotations

from adapter.domain.states import ImportState, OperationState
from adapter.ports.legacy import BatchStatus

__all__ = ["judge"]


def judge(status: BatchStatus, staged: int) -> tuple[str, OperationState, ImportState]:
    """(finding, operation state, import state) for ``status`` of an import of ``staged`` records."""
    if not status.committed:
        return "not_committed", OperationState.FAILED, ImportState.OPEN
    if len(status.batches) > 1:
        return "committed_more_than_once", OperationState.NEEDS_OPERATOR, ImportState.COMMITTED
    if status.batches[0].record_count != staged:
        return "committed_with_wrong_record_count", OperationState.NEEDS_OPERATOR, ImportState.COMMITTED
    return "committed", OperationState.SUCCEEDED, ImportState.COMMITTED
