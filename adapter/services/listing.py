"""Listing the caller's imports page by page, and following their changes.

Pages are newest first and frozen at the first page (``adapter.services.paging``); the cursor is
bound to the principal and to this list.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.domain.identity import Principal
from adapter.domain.views import ImportView
from adapter.services.context import ServiceContext
from adapter.services.imports import to_view
from adapter.services.paging import keyset_page

__all__ = ["ChangeFollower", "ImportPage", "list_imports"]

_PURPOSE = "imports/list"


@dataclass(frozen=True, slots=True)
class ImportPage:
    items: tuple[ImportView, ...]
    next_cursor: str | None


def _owner(principal: Principal) -> str:
    return f"{principal.tenant}\x00{principal.subject}"


def list_imports(ctx: ServiceContext, principal: Principal, *, cursor: str | None, limit: int) -> ImportPage:
    """One page of the caller's imports. Raises InvalidCursor for a cursor that does not verify."""
    mine = {"principal": principal.subject, "tenant": principal.tenant}
    with ctx.store.unit_of_work() as uow:
        rows, next_cursor = keyset_page(
            ctx, _PURPOSE, _owner(principal), cursor, limit, lambda window: uow.imports.page(mine, **window)
        )
        items = tuple(to_view(row, ctx.codec.handle_for(row.id), ctx, ()) for row in rows)
    return ImportPage(items=items, next_cursor=next_cursor)


class ChangeFollower:
    """Follows the event table and names the imports that changed, for ``resources/updated``.

    It reads the table, so every worker sees the changes every other worker (or the reconciler, or
    an operator) made. Event ids come from a sequence, but transactions commit in any order: an
    event with a lower id can become visible after a higher one. So the follower remembers the ids
    below the highest seen that it has not seen yet (``overlap`` ids deep) and asks for exactly
    those again, beside the newer ones: a read costs what is new, not a window of old rows (the
    PostgreSQL feed reads on every NOTIFY).
    """

    def __init__(self, ctx: ServiceContext, *, overlap: int = 1000, batch: int = 2000) -> None:
        self._ctx = ctx
        self._overlap = overlap
        self._batch = batch
        with ctx.store.unit_of_work() as uow:
            self._high = uow.events.latest_id()
            # What is already there is history, not news: a new listener is not told about it.
            low = max(0, self._high - overlap)
            present = {event_id for event_id, _ in uow.events.new_or_missing(low, (), overlap + 1)}
        self._missing = {i for i in range(low + 1, self._high + 1) if i not in present}

    def poll(self) -> list[str]:
        """Handles of the imports with events not reported before, oldest first, each once."""
        with self._ctx.store.unit_of_work() as uow:
            events = uow.events.new_or_missing(self._high, sorted(self._missing), self._batch)
        seen = {event_id for event_id, _ in events}
        top = max((event_id for event_id in seen if event_id > self._high), default=self._high)
        floor = max(self._high, top - self._overlap)  # ids further back than the window are given up
        gaps = {i for i in range(floor + 1, top) if i not in seen}
        self._missing = {i for i in (self._missing - seen) | gaps if i > top - self._overlap}
        self._high = top
        import_ids = dict.fromkeys(import_id for _, import_id in events if import_id is not None)
        return [self._ctx.codec.handle_for(import_id) for import_id in import_ids]
