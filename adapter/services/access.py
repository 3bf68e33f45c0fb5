"""Finding an import by handle, re-authorized on every call.

An unknown handle and another principal's handle raise the very same ``HandleNotFound``, so a
caller cannot probe which handles exist.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, TypeVar

from adapter.domain.errors import HandleExpired, HandleNotFound
from adapter.domain.identity import HandleCodec, Principal
from adapter.domain.states import ImportState
from adapter.store.tables import ImportRow
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["effective_state", "find_import", "find_usable_import", "owns"]


class Owned(Protocol):
    principal: str
    tenant: str


T = TypeVar("T")


def owns(principal: Principal, row: Owned) -> bool:
    return row.principal == principal.subject and row.tenant == principal.tenant


def handle_digest(handle: str) -> str:
    """The digest to look ``handle`` up by; HandleNotFound for something that is no handle at all."""
    if not isinstance(handle, str) or not HandleCodec.looks_like_handle(handle):
        raise HandleNotFound()
    return HandleCodec.digest(handle)


def require_owner(principal: Principal, row: T | None) -> T:
    """``row`` if it exists and is the caller's; otherwise the same HandleNotFound as for no row."""
    if row is None or not owns(principal, row):  # type: ignore[arg-type]
        raise HandleNotFound()
    return row


def find_import(uow: UnitOfWork, principal: Principal, handle: str, *, lock: bool = False) -> ImportRow:
    """The caller's import for ``handle``, or HandleNotFound; ``lock`` holds the row for a change."""
    return require_owner(principal, uow.imports.by_digest(handle_digest(handle), lock=lock))


def effective_state(row: ImportRow, now: datetime) -> ImportState:
    """An open import past its expiry is expired, whether or not a sweeper has marked it yet."""
    state = ImportState(row.state)
    if state is ImportState.OPEN and now >= row.expires_at:
        return ImportState.EXPIRED
    return state


def find_usable_import(uow: UnitOfWork, principal: Principal, handle: str, now: datetime) -> ImportRow:
    """Like find_import, locked for the change, and an expired import raises HandleExpired."""
    row = find_import(uow, principal, handle, lock=True)
    if effective_state(row, now) is ImportState.EXPIRED:
        raise HandleExpired()
    return row
