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
    event with a lower id can become visible after a higher one. So each poll re-reads a window of
    ``overlap`` ids below the highest seen and skips the events it has already reported.
    """

    def __init__(self, ctx: ServiceContext, *, overlap: int = 1000, batch: int = 2000) -> None:
        self._ctx = ctx
        self._overlap = overlap
        self._batch = batch
        with ctx.store.unit_of_work() as uow:
            self._high = uow.events.latest_id()
            # What is already there is history, not news: a new listener is not told about it.
            self._seen = {e.id for e in uow.events.after(max(0, self._high - overlap), batch)}

    def poll(self) -> list[str]:
        """Handles of the imports with events not reported before, oldest first, each once."""
        with self._ctx.store.unit_of_work() as uow:
            events = uow.events.after(max(0, self._high - self._overlap), self._batch)
        fresh = [e for e in events if e.id not in self._seen and e.id > self._high - self._overlap]
        if events:
            self._high = max(self._high, events[-1].id)
        self._seen.update(e.id for e in fresh)
        self._seen = {i for i in self._seen if i > self._high - self._overlap}
        import_ids = dict.fromkeys(e.import_id for e in fresh if e.import_id is not None)
        return [self._ctx.codec.handle_for(import_id) for import_id in import_ids]
