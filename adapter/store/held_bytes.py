"""What each tenant's imports hold against its staged-bytes quota: read per add, kept by triggers.

A tenant holds the staged bytes of its imports but the aborted and expired ones (:data:`tables.
HOLDING`), and committed imports hold theirs until the purge removes their records, days later. A
sum over those imports cost every add in proportion to them, so the store keeps the total
(migration ``0012``):

* a trigger on ``imports`` adds each change of an import's share (an add, a replace, an abort or
  expiry, the purge), whoever writes it, to ``held_bytes_changes``: one row per tenant and
  database connection, so a connection only ever waits for itself;
* :func:`fold_held_bytes` (every maintenance pass) moves those rows into ``tenant_held_bytes``;
* :func:`held_bytes_of` is the tenant's total plus its rows not folded yet: what an add checks, at
  the cost of a primary-key lookup and about one row per connection that changed it lately.

One counter row per tenant that every add updated would make a tenant's concurrent adds wait for
each other, and a pass that changes many imports could deadlock against them.
:func:`recount_held_bytes` sums the imports themselves, for the checks that the two agree.
"""

from __future__ import annotations

import collections
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Table,
    delete,
    exists,
    func,
    select,
    text,
    true,
    tuple_,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from adapter.store.tables import HOLDING, HeldBytesChangeRow, ImportRow, TenantHeldBytesRow

__all__ = [
    "counted_held_bytes",
    "fold_held_bytes",
    "has_changes_to_fold",
    "held_bytes_of",
    "recount_held_bytes",
    "tenant_held_bytes",
]

_totals = cast(Table, TenantHeldBytesRow.__table__)
_changes = cast(Table, HeldBytesChangeRow.__table__)


def held_bytes_of(tenant: BindParameter[Any] | str) -> ColumnElement[Any]:
    """What ``tenant`` holds, as a scalar expression (the add path puts it in its own statement)."""
    folded = select(_totals.c.bytes).where(_totals.c.tenant == tenant).scalar_subquery()
    pending = select(func.sum(_changes.c.change)).where(_changes.c.tenant == tenant).scalar_subquery()
    return func.coalesce(folded, 0) + func.coalesce(pending, 0)


def tenant_held_bytes(session: Session, tenant: str) -> int:
    """What the tenant's imports hold against the staged-bytes quota: all but the released ones."""
    return int(session.scalar(select(held_bytes_of(tenant))) or 0)


def has_changes_to_fold(session: Session) -> bool:
    return bool(session.scalar(select(exists().where(true()).select_from(_changes))))


def fold_held_bytes(session: Session) -> int:
    """Move the changes into the tenants' totals, in the caller's transaction; how many tenants'
    totals moved. Each change is moved once. On PostgreSQL the ``DELETE ... RETURNING`` that takes
    them feeds the update of the totals in one statement, and it skips the rows a transaction in
    flight holds (``SKIP LOCKED``): a fold never waits for an add, nor a concurrent fold for it,
    and what it skips the next one moves. On SQLite the write transaction holds every other writer
    off."""
    if session.connection().dialect.name == "postgresql":
        free = select(_changes.c.tenant, _changes.c.backend).with_for_update(skip_locked=True)
        moved = (
            delete(_changes)
            .where(tuple_(_changes.c.tenant, _changes.c.backend).in_(free))
            .returning(_changes.c.tenant, _changes.c.change)
            .cte("moved")
        )
        summed = (
            select(moved.c.tenant, func.sum(moved.c.change))
            .group_by(moved.c.tenant)
            .order_by(moved.c.tenant)  # every fold takes the totals' rows in one order
        )
        into = postgresql.insert(_totals).from_select(["tenant", "bytes"], summed).add_cte(moved)
        upsert: Any = into.on_conflict_do_update(
            index_elements=[_totals.c.tenant], set_={"bytes": _totals.c.bytes + into.excluded.bytes}
        )
        return len(session.execute(upsert.returning(_totals.c.tenant)).all())
    # ``WHERE true``: SQLite's documented way to keep ``INSERT ... SELECT ... ON CONFLICT`` unambiguous.
    summed = select(_changes.c.tenant, func.sum(_changes.c.change)).where(true()).group_by(_changes.c.tenant)
    lite = sqlite.insert(_totals).from_select(["tenant", "bytes"], summed)
    folded = session.execute(
        lite.on_conflict_do_update(
            index_elements=[_totals.c.tenant], set_={"bytes": _totals.c.bytes + lite.excluded.bytes}
        ).returning(_totals.c.tenant)
    ).all()
    session.execute(delete(_changes))
    return len(folded)


def counted_held_bytes(session: Session) -> dict[str, int]:
    """Every tenant's total as the quota reads it (folded and not), tenants holding 0 left out."""
    held: collections.Counter[str] = collections.Counter()
    for tenant, total in session.execute(select(_totals.c.tenant, _totals.c.bytes)):
        held[tenant] += int(total)
    for tenant, change in session.execute(select(_changes.c.tenant, _changes.c.change)):
        held[tenant] += int(change)
    return {tenant: total for tenant, total in held.items() if total}


def recount_held_bytes(session: Session) -> dict[str, int]:
    """Every tenant's total summed over its imports (:data:`HOLDING`): what the triggers keep."""
    imports = cast(Table, ImportRow.__table__)
    query = (
        select(imports.c.tenant, func.sum(imports.c.staged_bytes))
        .where(text(HOLDING))
        .group_by(imports.c.tenant)
    )
    return {tenant: int(total) for tenant, total in session.execute(query) if total}
