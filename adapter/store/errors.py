"""Driver errors become the kit's own store errors here, and nowhere else.

The unit of work and the read path call :func:`translated` on whatever leaves them, so no service,
route or command above the store needs to know SQLAlchemy or a driver: a lost race is
:class:`~adapter.domain.errors.StoreConflict` (retried by ``retry_on_conflict``), a database that does
not answer is :class:`~adapter.domain.errors.StoreUnavailable`. Anything else (a bug: a bad statement)
passes unchanged. The driver's message is kept only as the ``__cause__``: with PostgreSQL it may
quote a key's value, so it never becomes the message a caller sees.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm.exc import StaleDataError

from adapter.domain.errors import StoreConflict, StoreError, StoreUnavailable

__all__ = ["raise_translated", "translated"]

_CONFLICT = (sa_exc.IntegrityError, StaleDataError)
_UNAVAILABLE = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,  # no pooled connection came free in time
)


def translated(exc: BaseException, dbapi: Any = None) -> StoreError | None:
    """The store error for a driver error, or ``None`` when ``exc`` is not one to translate.

    ``dbapi`` is the driver module: errors the driver raises directly (PostgreSQL's COPY bypasses
    SQLAlchemy) are recognised by the DB-API 2 names every driver defines.
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


def raise_translated(exc: BaseException, dbapi: Any) -> None:
    """Raise the store error for ``exc`` (chained to it) if it has one; return otherwise."""
    error = translated(exc, dbapi)
    if error is not None:
        raise error from exc
