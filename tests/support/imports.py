"""Making imports through the service layer, as a client would: begin, then add records."""

from __future__ import annotations

from typing import Any

from adapter.domain.identity import Principal
from adapter.services import ImportService


def records(n: int) -> list[dict[str, Any]]:
    """``n`` small records, numbered from 0."""
    return [{"n": i} for i in range(n)]


def staged(
    service: ImportService,
    who: Principal,
    rows: list[dict[str, Any]] | int = 1,
    *,
    target: str = "customers",
    key: str | None = None,
    chunk: int = 1000,
) -> str:
    """The handle of an open import holding ``rows`` (records, or a count of :func:`records`),
    added ``chunk`` at a time."""
    batch = records(rows) if isinstance(rows, int) else rows
    handle = service.begin(who, target, idempotency_key=key).handle
    for start in range(0, len(batch), chunk):
        service.add(who, handle, batch[start : start + chunk])
    return handle
