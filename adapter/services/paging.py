"""Keyset paging with signed cursors, written once for the caller's list and the operators' lists.

Pages are newest first. The first page fixes a snapshot time (``as_of``); later pages only show rows
created at or before it and continue after the last ``(created_at, id)`` seen, so rows created or
deleted between pages cause neither duplicates nor gaps. The cursor is signed, bound to a purpose
(which list) and an owner (the principal, or a digest of the operator's filters), and expires
(see ``adapter.domain.cursors``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from adapter.domain.cursors import InvalidCursor
from adapter.services.context import ServiceContext

__all__ = ["K", "Keyed", "Window", "keyset_page"]


class Keyed(Protocol):
    """What a row needs for keyset paging."""

    @property
    def id(self) -> str: ...

    @property
    def created_at(self) -> datetime: ...


K = TypeVar("K", bound=Keyed)
Window = dict[str, Any]
"""The keyword arguments of a repository's ``page()``: ``as_of``, ``before``, ``limit``."""


def keyset_page(
    ctx: ServiceContext,
    purpose: str,
    owner: str,
    cursor: str | None,
    limit: int,
    fetch: Callable[[Window], Sequence[K]],
) -> tuple[list[K], str | None]:
    """One page from ``fetch`` (a repository's ``page`` with the list's filters bound) and the next cursor.

    Raises ``InvalidCursor`` for a cursor that does not verify for this purpose and owner.
    """
    now = ctx.clock()
    as_of, before = now, None
    if cursor is not None:
        position = ctx.cursors.open(cursor, purpose, owner, now)
        try:
            as_of = datetime.fromisoformat(position["as_of"])
            before = (datetime.fromisoformat(position["created_at"]), str(position["id"]))
        except (KeyError, TypeError, ValueError):
            raise InvalidCursor() from None
    rows = list(fetch({"as_of": as_of, "before": before, "limit": limit + 1}))
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    position = {"as_of": as_of.isoformat(), "created_at": last.created_at.isoformat(), "id": last.id}
    return rows[:limit], ctx.cursors.seal(purpose, owner, position, now)
