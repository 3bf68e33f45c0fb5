"""Listing the caller's imports page by page, and following their changes.

Pages are newest first. The first page fixes a snapshot time; later pages only show imports created
at or before it and continue after the last (created_at, id) seen, so imports created or deleted
between pages cause neither duplicates nor gaps. The cursor is signed, bound to the principal and to
this list, and expires (see ``adapter.domain.cursors``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from adapter.domain.cursors import InvalidCursor
from adapter.domain.identity import Principal
from adapter.domain.views import ImportView
from adapter.services.context import ServiceContext
from adapter.services.imports import to_view

__all__ = ["ImportPage", "changed_handles_since", "latest_event_id", "list_imports"]

_PURPOSE = "imports/list"


@dataclass(frozen=True, slots=True)
class ImportPage:
    items: tuple[ImportView, ...]
    next_cursor: str | None


def _owner(principal: Principal) -> str:
    return f"{principal.tenant}\x00{principal.subject}"


def list_imports(ctx: ServiceContext, principal: Principal, *, cursor: str | None, limit: int) -> ImportPage:
    """One page of the caller's imports. Raises InvalidCursor for a cursor that does not verify."""
    now = ctx.clock()
    as_of, before = now, None
    if cursor is not None:
        position = ctx.cursors.open(cursor, _PURPOSE, _owner(principal), now)
        try:
            as_of = datetime.fromisoformat(position["as_of"])
            before = (datetime.fromisoformat(position["created_at"]), str(position["id"]))
        except (KeyError, TypeError, ValueError):
            raise InvalidCursor() from None
    with ctx.store.unit_of_work() as uow:
        rows = uow.imports.page_for_owner(
            principal.subject, principal.tenant, as_of=as_of, before=before, limit=limit + 1
        )
        items = tuple(to_view(row, ctx.codec.handle_for(row.id), ctx, ()) for row in rows[:limit])
    next_cursor = None
    if len(rows) > limit:
        last = items[-1]
        next_cursor = ctx.cursors.seal(
            _PURPOSE,
            _owner(principal),
            {"as_of": as_of.isoformat(), "created_at": last.created_at.isoformat(), "id": last.import_id},
            now,
        )
    return ImportPage(items=items, next_cursor=next_cursor)


def latest_event_id(ctx: ServiceContext) -> int:
    with ctx.store.unit_of_work() as uow:
        return uow.events.latest_id()


def changed_handles_since(ctx: ServiceContext, last_id: int, limit: int = 500) -> tuple[int, list[str]]:
    """Handles of imports that changed after event ``last_id``, and the new high-water mark.

    This feeds ``notifications/resources/updated``: it reads the event table, so every worker sees
    the changes every other worker made.
    """
    with ctx.store.unit_of_work() as uow:
        events = uow.events.after(last_id, limit)
    if not events:
        return last_id, []
    import_ids = list(dict.fromkeys(e.import_id for e in events if e.import_id is not None))
    return events[-1].id, [ctx.codec.handle_for(import_id) for import_id in import_ids]
