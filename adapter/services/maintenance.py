"""The background work a running kit does on a timer: reconcile, resume, expire, purge, fold.

The server runs :func:`run_maintenance` every ``ADAPTER_RECONCILE_INTERVAL_SECONDS``;
``python -m adapter reconcile`` runs it once. Every step is safe to run from several workers at
once (leases and optimistic versions decide who acts).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from adapter.ports.legacy import LegacyError
from adapter.services.abort import resume_compensations, settle_abort_requests
from adapter.services.context import ServiceContext
from adapter.services.late_commits import watch_recent_verdicts
from adapter.services.quotas import discard_leftovers, fold_held_bytes
from adapter.services.reconcile import Resolution, Resume, reconcile_pass
from adapter.services.retention import PurgeReport, expire_open_imports, purge_finished
from adapter.store.locks import try_named_lock

__all__ = ["MaintenanceReport", "run_maintenance"]

log = logging.getLogger("adapter.maintenance")


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    resolutions: list[Resolution] = field(default_factory=list)
    compensations: list[str] = field(default_factory=list)
    expired: int = 0
    purged: PurgeReport | None = None


def run_maintenance(
    ctx: ServiceContext,
    *,
    retention: timedelta | None = None,
    purge_batch: int | None = None,
    resume: Resume | None = None,
) -> MaintenanceReport:
    """One pass. ``retention`` None skips the purge (it need not run every few seconds). ``resume``
    runs again the commits whose worker went away before COMMIT (``reconcile.py``)."""
    try:
        return _one_pass(ctx, retention, purge_batch, resume)
    finally:
        fold_held_bytes(ctx)  # whatever the pass got to: it moved what tenants hold (expiry, purge)


def _one_pass(
    ctx: ServiceContext, retention: timedelta | None, purge_batch: int | None, resume: Resume | None
) -> MaintenanceReport:
    resolutions = reconcile_pass(ctx, resume=resume)
    watch_recent_verdicts(ctx)  # a COMMIT that landed after its not_committed verdict
    try:
        compensations = resume_compensations(ctx)
        settle_abort_requests(ctx)  # an abort asked while committing, whose follow-up a crash stopped
    except LegacyError:
        log.info("resuming compensations postponed: the legacy system is unavailable")
        compensations = []
    expired = expire_open_imports(ctx)
    discard_leftovers(ctx)  # staged records an abort or expiry left when its process stopped
    purged = _purge_once(ctx, retention, purge_batch) if retention is not None else None
    return MaintenanceReport(resolutions, compensations, expired, purged)


def _purge_once(ctx: ServiceContext, retention: timedelta, batch: int | None) -> PurgeReport | None:
    """Purge, unless another worker is purging right now (then None: it does the work)."""
    with try_named_lock(ctx.store, "purge") as mine:
        if not mine:
            log.info("purge skipped: another worker is purging")
            return None
        return purge_finished(ctx, retention=retention, batch=batch)
