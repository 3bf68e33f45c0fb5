"""What the legacy system's answer about a batch reference means for the operation and the import.

One judgement, used wherever the kit learns an outcome by asking (reconciliation, and a retried
commit that asks before committing again), so both reach the same verdict.
"""

from __future__ import annotations

from adapter.domain.states import ImportState, OperationState
from adapter.domain.vocabulary import Finding
from adapter.ports.legacy import BatchStatus

__all__ = ["judge"]


def judge(status: BatchStatus, staged: int) -> tuple[Finding, OperationState, ImportState]:
    """(finding, operation state, import state) for ``status`` of an import of ``staged`` records."""
    if not status.committed:
        return Finding.NOT_COMMITTED, OperationState.FAILED, ImportState.OPEN
    if len(status.batches) > 1:
        return Finding.COMMITTED_MORE_THAN_ONCE, OperationState.NEEDS_OPERATOR, ImportState.COMMITTED
    if status.batches[0].record_count != staged:
        return Finding.COMMITTED_WITH_WRONG_RECORD_COUNT, OperationState.NEEDS_OPERATOR, ImportState.COMMITTED
    return Finding.COMMITTED, OperationState.SUCCEEDED, ImportState.COMMITTED
