"""Operator sessions of the dashboard, and the brake on guessing admin tokens.

The dashboard's cookie must not be the admin token itself: a token in a cookie lives as long as the
token does and cannot be revoked by logging out. A login instead opens a session: a random id (the
cookie), of which the store keeps only the SHA-256, with an expiry; logout deletes it. Sessions live
in the database so every worker accepts them.

Failed logins are counted per client address in this process (:class:`LoginThrottle`): after
``max_failures`` within ``window_seconds`` further attempts are refused until the window has passed,
so a token cannot be guessed at the speed of the network.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta

from adapter.store import Store
from adapter.store.operator_sessions import OperatorSessionRepository
from adapter.store.tables import utcnow

__all__ = ["LoginThrottle", "OperatorSessions"]

_ROLES = frozenset({"operator", "viewer"})


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


class OperatorSessions:
    """Open, look up and revoke dashboard sessions."""

    def __init__(
        self, store: Store, *, lifetime_seconds: int, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.store = store
        self.lifetime = timedelta(seconds=lifetime_seconds)
        self.clock = clock

    def open(self, role: str) -> str:
        """A new session for ``role``; returns its id (the cookie value). Purges expired ones."""
        if role not in _ROLES:
            raise ValueError(f"unknown role {role!r}")
        session_id = secrets.token_urlsafe(32)
        now = self.clock()
        with self.store.unit_of_work() as uow:
            sessions = OperatorSessionRepository(uow.session)
            sessions.purge_expired(now)
            sessions.add(_digest(session_id), role, now, now + self.lifetime)
            uow.commit()
        return session_id

    def role_of(self, session_id: str | None) -> str | None:
        """The role of a live session, or None (unknown, expired or revoked)."""
        if not session_id or len(session_id) > 200:
            return None
        with self.store.reading() as uow:
            row = OperatorSessionRepository(uow.session).get(_digest(session_id))
        if row is None or row.expires_at <= self.clock():
            return None
        return row.role

    def revoke(self, session_id: str | None) -> None:
        if not session_id or len(session_id) > 200:
            return
        with self.store.unit_of_work() as uow:
            OperatorSessionRepository(uow.session).delete(_digest(session_id))
            uow.commit()


class LoginThrottle:
    """At most ``max_failures`` failed logins per client within ``window_seconds`` (in this process)."""

    MAX_CLIENTS = 10_000  # bounded memory whatever the number of addresses

    def __init__(self, *, max_failures: int, window_seconds: float) -> None:
        self.max_failures = max_failures
        self.window = window_seconds
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0 when it may try now."""
        now = time.monotonic()
        with self._lock:
            failures = self._recent(client, now)
            if len(failures) < self.max_failures:
                return 0.0
            return max(0.0, failures[0] + self.window - now)

    def failed(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            if client not in self._failures and len(self._failures) >= self.MAX_CLIENTS:
                self._failures.pop(next(iter(self._failures)))
            self._recent(client, now).append(now)

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.setdefault(client, deque())
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        return failures
