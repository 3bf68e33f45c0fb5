"""The one retry policy for legacy calls that may be repeated safely (a replay before COMMIT, a VOID).

Bounded by ``CommitPolicy.max_attempts`` and jittered (``wait_random_exponential``), retrying only
``LegacyTransient``: the legacy system said it did not apply the call, so trying again cannot double it.
"""

from __future__ import annotations

from collections.abc import Callable

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from adapter.ports.legacy import LegacyTransient
from adapter.services.context import CommitPolicy

__all__ = ["legacy_retrying"]


def legacy_retrying(
    policy: CommitPolicy, *, before_sleep: Callable[[RetryCallState], None] | None = None
) -> Retrying:
    """A tenacity ``Retrying`` for one transient-safe legacy step; the last error is re-raised."""
    return Retrying(
        retry=retry_if_exception_type(LegacyTransient),
        stop=stop_after_attempt(policy.max_attempts),
        wait=wait_random_exponential(multiplier=policy.retry_wait_initial, max=policy.retry_wait_max),
        before_sleep=before_sleep,
        reraise=True,
    )
