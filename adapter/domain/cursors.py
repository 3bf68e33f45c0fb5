"""Signed, expiring cursors for paginated lists.

A cursor is ``base64url(json payload) + "." + base64url(HMAC)``. The payload names its purpose
(which list), the principal it was issued to (as a digest), an expiry, and where the next page
starts. A cursor that is tampered with, expired, issued for another list or to another principal
fails verification: callers get one generic "invalid cursor" error and start the list again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import datetime, timedelta
from typing import Any

from adapter.domain.errors import InvalidCursor

__all__ = ["CursorCodec", "InvalidCursor"]  # InvalidCursor lives in the error tree; re-exported here


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorCodec:
    def __init__(self, secret: bytes, ttl: timedelta = timedelta(minutes=15)) -> None:
        self._key = hmac.new(secret, b"adapter/cursor-key/v1", hashlib.sha256).digest()
        self._ttl = ttl

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    @staticmethod
    def _owner(owner: str) -> str:
        return hashlib.sha256(owner.encode()).hexdigest()[:32]

    def seal(self, purpose: str, owner: str, position: dict[str, Any], now: datetime) -> str:
        payload = {
            "p": purpose,
            "o": self._owner(owner),
            "exp": (now + self._ttl).timestamp(),
            "pos": position,
        }
        body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self._mac(body)}"

    def open(self, cursor: str, purpose: str, owner: str, now: datetime) -> dict[str, Any]:
        """The position sealed in ``cursor``; InvalidCursor for anything else."""
        try:
            body, mac = cursor.split(".", 1)
            if not hmac.compare_digest(mac, self._mac(body)):
                raise InvalidCursor()
            payload = json.loads(_unb64(body))
        except (ValueError, TypeError, AttributeError) as exc:
            raise InvalidCursor() from exc
        if payload.get("p") != purpose or payload.get("o") != self._owner(owner):
            raise InvalidCursor()
        if not isinstance(payload.get("exp"), int | float) or now.timestamp() > payload["exp"]:
            raise InvalidCursor()
        position = payload.get("pos")
        if not isinstance(position, dict):
            raise InvalidCursor()
        return position
