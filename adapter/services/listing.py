"""Listing the caller's imports page by page, and following their changes.

Pages are newest first and frozen at the first page (``adapter.services.paging``); the cursor is
bound to the principal and to this list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapter.domain.identity import Principal
from adapter.domain.views import ImportView
from adapter.domain.vocabulary import EventKind
from adapter.services.context import ServiceContext
from adapter.services.imports import to_view
from adapter.services.paging import keyset_page
from adapter.store.tables import EventRow
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["ChangeFollower", "ImportChange", "ImportPage", "list_imports"]

_PURPOSE = "imports/list"

LIST_EVENTS = frozenset({EventKind.IMPORT_OPENED, EventKind.IMPORT_EXPIRED, EventKind.IMPORT_PURGED})
"""Events that change what an owner's import list holds: an import appears, closes, or goes."""


@dataclass(frozen=True, slots=True)
class ImportChange:
    """One import that changed; ``list_owner`` is set when its owner's import list changed with it;
    ``operations`` are the ids of its operations the events were about (a task's changes)."""

    handle: str
    list_owner: Principal | None
    operations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ImportPage:
    items: tuple[ImportView, ...]
    next_cursor: str | None


def _owner(principal: Principal) -> str:
    return f"{principal.tenant}\x00{principal.subject}"


def list_imports(ctx: ServiceContext, principal: Principal, *, cursor: str | None, limit: int) -> ImportPage:
    """One page of the caller's imports. Raises InvalidCursor for a cursor that does not verify."""
    mine = {"principal": principal.subject, "tenant": principal.tenant}
    with ctx.store.reading() as uow:
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
        with ctx.store.reading() as uow:
            self._high = uow.events.latest_id()
            # What is already there is history, not news: a new listener is not told about it.
            low = max(0, self._high - overlap)
            present = {event.id for event in uow.events.new_or_missing(low, (), overlap + 1)}
        self._missing = {i for i in range(low + 1, self._high + 1) if i not in present}

    def poll(self) -> list[str]:
        """Handles of the imports with events not reported before, oldest first, each once."""
        return [change.handle for change in self.poll_changes()]

    def poll_changes(self, listening: Callable[[], bool] | None = None) -> list[ImportChange]:
        """The imports with events not reported before, oldest first, each once, with list owners.

        ``listening`` says whether anyone could be told (a listen stream, a 2025-era session). While
        nobody is, the follower only moves past what is new, reading event ids alone: loading every
        event and its import for nobody was 7% of a busy worker's Python time. It asks again after
        that read, and reads fully if someone arrived meanwhile: what it skips was committed before
        anyone listened, and a new listener starts from now.
        """
        if listening is not None and not listening():
            with self._ctx.store.reading() as uow:
                ids = uow.events.ids_new_or_missing(self._high, sorted(self._missing), self._batch)
            if not listening():
                self._advance(set(ids))
                return []
        with self._ctx.store.reading() as uow:
            events = uow.events.new_or_missing(self._high, sorted(self._missing), self._batch)
            owners = _list_owners(uow, [e for e in events if e.kind in LIST_EVENTS])
        self._advance({event.id for event in events})
        changed: dict[str, dict[str, None]] = {}  # import id -> its operations' ids, in order
        for event in events:
            if event.import_id is not None:
                about = changed.setdefault(event.import_id, {})
                if event.operation_id is not None:
                    about[event.operation_id] = None
        return [
            ImportChange(self._ctx.codec.handle_for(import_id), owners.get(import_id), tuple(about))
            for import_id, about in changed.items()
        ]

    def _advance(self, seen: set[int]) -> None:
        """Move past the ``seen`` event ids; remember the lower ids not seen yet (``overlap`` deep)."""
        top = max((event_id for event_id in seen if event_id > self._high), default=self._high)
        floor = max(self._high, top - self._overlap)  # ids further back than the window are given up
        gaps = {i for i in range(floor + 1, top) if i not in seen}
        self._missing = {i for i in (self._missing - seen) | gaps if i > top - self._overlap}
        self._high = top


def _list_owners(uow: UnitOfWork, events: list[EventRow]) -> dict[str, Principal]:
    """Whose list each event changed: from the import row, or for a purged import from the event."""
    owners: dict[str, Principal] = {}
    for event in events:
        if event.import_id is None:
            continue
        detail = event.detail or {}
        if event.kind == EventKind.IMPORT_PURGED and "principal" in detail:
            owners[event.import_id] = Principal(str(detail["principal"]), str(detail["tenant"]))
            continue
        row = uow.imports.get(event.import_id)
        if row is not None:
            owners[event.import_id] = Principal(row.principal, row.tenant)
    return owners
