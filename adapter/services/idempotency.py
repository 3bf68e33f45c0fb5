"""At most one effect per idempotency key: the rules begin, add and commit share.

``(tenant, principal, kind, key)`` is unique in the store. The operation row, the effect and the result are
written in one transaction (begin and add: ``StagingRepository.record_outcome``), so either all of them
exist or none. Begin and add look their key up first and answer a repeat with :func:`recorded_outcome`
(commit, in its claim). A second call with the same key:

* and the same request fingerprint gets the stored result, marked as a replay;
* and a different fingerprint gets ``idempotency_key_reused``;
* while the first is still running waits for it (the database serializes the two transactions),
  then gets the replay: it never executes a second time.

Two concurrent first calls race on the unique key; the loser's transaction fails, rolls back, and
is retried, and then finds the winner's result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random

from adapter.domain.errors import IdempotencyKeyReused, InvalidRequest, StoreConflict
from adapter.domain.identity import Principal, new_id
from adapter.domain.states import OperationState
from adapter.store.tables import OperationRow

__all__ = [
    "MAX_KEY_LENGTH",
    "Outcome",
    "check_fingerprint",
    "new_operation",
    "recorded_outcome",
    "retry_on_conflict",
    "validate_key",
]

T = TypeVar("T")

MAX_KEY_LENGTH = 200


def validate_key(key: str | None) -> str | None:
    """The idempotency key as given, or InvalidRequest: 1 to MAX_KEY_LENGTH printable characters."""
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH or not key.isprintable():
        raise InvalidRequest(f"idempotency_key must be 1..{MAX_KEY_LENGTH} printable characters")
    return key


@dataclass(frozen=True, slots=True)
class Outcome:
    operation_id: str
    import_id: str | None
    result: dict[str, Any]
    replayed: bool


def retry_on_conflict(fn: Callable[[], T]) -> T:
    """Run ``fn`` again when it lost a race (unique key or optimistic version); bounded and jittered."""
    retrying = Retrying(
        retry=retry_if_exception_type(StoreConflict),
        stop=stop_after_attempt(6),
        wait=wait_random(0, 0.05),
        reraise=True,
    )
    return retrying(fn)


class Fingerprinted(Protocol):
    @property
    def request_fingerprint(self) -> str: ...


F = TypeVar("F", bound=Fingerprinted)


class RecordedOperation(Fingerprinted, Protocol):
    """An operation found by its idempotency key (an ORM row or the add path's lighter read)."""

    @property
    def id(self) -> str: ...
    @property
    def import_id(self) -> str | None: ...
    @property
    def result(self) -> dict[str, Any] | None: ...


def check_fingerprint(existing: F, fingerprint: str) -> F:
    """``existing`` if it was made by the same request, else ``idempotency_key_reused``."""
    if existing.request_fingerprint != fingerprint:
        raise IdempotencyKeyReused()
    return existing


def new_operation(
    principal: Principal, kind: str, key: str | None, fingerprint: str, *, status: OperationState
) -> OperationRow:
    return OperationRow(
        id=new_id(),
        kind=kind,
        principal=principal.subject,
        tenant=principal.tenant,
        idempotency_key=key,
        request_fingerprint=fingerprint,
        status=status.value,
        attempts=1,
    )


def recorded_outcome(earlier: RecordedOperation, fingerprint: str) -> Outcome:
    """The stored answer to a repeat of an earlier call with the same key; IdempotencyKeyReused if
    the repeat asks for something else."""
    check_fingerprint(earlier, fingerprint)
    return Outcome(earlier.id, earlier.import_id, dict(earlier.result or {}), True)
