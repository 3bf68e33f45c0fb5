"""Driver errors become the kit's own store errors here, and nowhere else.

The unit of work and the read path call :func:`translated` on whatever leaves them, so no service,
route or command above the store needs to know SQLAlchemy or a driver: a lost race is
:class:`~adapter.domain.errors.StoreConflict` (retried by ``retry_on_conflict``), a database that does
not answer is :class:`~adapter.domain.errors.StoreUnavailable`. Anything else (a bug: a bad statement)
passes unchanged. The driver's message is kept only as the ``__cause__``: with PostgreSQL it may
quote a key's value, so it never becomes the message a caller sees.

A write refused because the disk is full (SQLite's ``SQLITE_FULL``, PostgreSQL's ``53100``, an
``ENOSPC``) is ``StoreUnavailable`` like any other, but the store's :class:`StoreHealth` notes it: one
log line names the cause (at most every ``LOG_EVERY`` seconds), and the readiness check reports it
for ``WINDOW`` seconds, since a probe that rolls back needs no space and would still say ready.
"""

from __future__ import annotations

import errno
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm.exc import StaleDataError

from adapter.domain.errors import StoreConflict, StoreError, StoreUnavailable

__all__ = ["StoreHealth", "disk_full", "raise_translated", "translated"]

log = logging.getLogger("adapter.store")
_DISK_FULL_SQLSTATE = "53100"  # PostgreSQL's disk_full

_CONFLICT = (sa_exc.IntegrityError, StaleDataError)
_UNAVAILABLE = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,  # no pooled connection came free in time
)


def translated(exc: BaseException, dbapi: Any = None) -> StoreError | None:
    """The store error for a driver error, or ``None`` when ``exc`` is not one to translate.

    ``dbapi`` is the driver module: errors the driver raises directly (the statements ``driver.py``
    and the SQLite staging run bypass SQLAlchemy) are recognised by the DB-API 2 names every driver defines.
    """
    if isinstance(exc, StoreError):
        return None
    if isinstance(exc, _CONFLICT):
        return StoreConflict()
    if isinstance(exc, _UNAVAILABLE):
        return StoreUnavailable()
    if dbapi is not None:
        if isinstance(exc, dbapi.IntegrityError):
            return StoreConflict()
        if isinstance(exc, dbapi.OperationalError | dbapi.InterfaceError):
            return StoreUnavailable()
    return None


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says the database's disk is full."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sqlite3.OperationalError) and (
            getattr(current, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            or "disk is full" in str(current)
        ):
            return True
        if getattr(current, "sqlstate", None) == _DISK_FULL_SQLSTATE:
            return True
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return True
        orig = getattr(current, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's error
        current = orig if isinstance(orig, BaseException) else (current.__cause__ or current.__context__)
    return False


class StoreHealth:
    """What this process's store saw go wrong that a readiness probe cannot see itself: a full disk."""

    WINDOW = 60.0
    LOG_EVERY = 10.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._disk_full_at: float | None = None
        self._logged_at: float | None = None
        self._lock = threading.Lock()

    def note(self, exc: BaseException) -> None:
        if not disk_full(exc):
            return
        with self._lock:
            now = self._clock()
            self._disk_full_at = now
            if self._logged_at is not None and now - self._logged_at < self.LOG_EVERY:
                return
            self._logged_at = now
        log.warning(
            json.dumps(
                {
                    "event": "store.disk_full",
                    "cause": "the database's disk is full",
                    "error": type(exc.__cause__ or exc).__name__,
                }
            )
        )

    def disk_full_since(self) -> float | None:
        """Seconds since a write was last refused for a full disk, within ``WINDOW``; else None."""
        with self._lock:
            if self._disk_full_at is None:
                return None
            ago = self._clock() - self._disk_full_at
        return ago if ago <= self.WINDOW else None


def raise_translated(exc: BaseException, dbapi: Any, health: StoreHealth | None = None) -> None:
    """Raise the store error for ``exc`` (chained to it) if it has one; return otherwise. ``health``
    is told of a full disk."""
    if health is not None:
        health.note(exc)
    error = translated(exc, dbapi)
    if error is not None:
        raise error from exc
