"""The maintenance loop a server process runs beside its requests (reconcile, expire, purge)."""

from __future__ import annotations

import functools
import logging
import time
from datetime import timedelta

import anyio
import anyio.to_thread

from adapter.config import Settings
from adapter.services import ImportService

__all__ = ["run_maintenance_loop"]

log = logging.getLogger("adapter.maintenance")

PURGE_EVERY_SECONDS = 3600.0


async def run_maintenance_loop(service: ImportService, settings: Settings) -> None:
    """Forever: one maintenance pass per interval, the purge once an hour. Cancel to stop."""
    retention = timedelta(days=settings.retention_days)
    last_purge = 0.0
    while True:
        purge_now = time.monotonic() - last_purge >= PURGE_EVERY_SECONDS
        try:
            report = await anyio.to_thread.run_sync(
                functools.partial(
                    service.maintain,
                    retention=retention if purge_now else None,
                    purge_batch=settings.purge_batch_size,
                )
            )
            if purge_now:
                last_purge = time.monotonic()
            for resolution in report.resolutions:
                log.info(
                    "reconciled %s: %s -> %s (%s)",
                    resolution.operation_id,
                    resolution.previous,
                    resolution.status,
                    resolution.finding,
                )
        except Exception:  # a failing pass must not stop the next one
            log.warning("maintenance pass failed; retrying next interval", exc_info=True)
        await anyio.sleep(settings.reconcile_interval_seconds)
