"""Who is calling, and the secrets that make handles opaque.

A handle is derived, not stored: ``handle = "imp_" + b64url(HMAC(secret, "handle:" + import_id))``.
The store keeps only ``sha256(handle)`` to find the import again. So a database reader cannot use
what is in the database as a handle, while the server can still re-derive the same handle for a
replayed ``begin`` and for listing imports by handle. The import id is 128 random bits, so a handle
cannot be predicted without the secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

__all__ = ["HandleCodec", "Principal", "fingerprint", "new_id"]

_HANDLE_PREFIX = "imp_"


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller. Every handle and operation is bound to both fields."""

    subject: str
    tenant: str


def new_id() -> str:
    """A fresh 128-bit random identifier (hex), used for imports and operations."""
    return secrets.token_hex(16)


class HandleCodec:
    """Derives handles from import ids and digests handles for lookup."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("the handle secret must be at least 32 bytes")
        self._key = hmac.new(secret, b"adapter/handle-key/v1", hashlib.sha256).digest()

    def derive_key(self, purpose: bytes) -> bytes:
        """A separate 32-byte key for another purpose (request state, cursors), from the same secret."""
        return hmac.new(self._key, b"derive:" + purpose, hashlib.sha256).digest()

    def handle_for(self, import_id: str) -> str:
        mac = hmac.new(self._key, b"handle:" + import_id.encode(), hashlib.sha256).digest()[:24]
        return _HANDLE_PREFIX + base64.urlsafe_b64encode(mac).decode().rstrip("=")

    @staticmethod
    def digest(handle: str) -> str:
        """The only form of a handle the store keeps (also safe to put in logs)."""
        return hashlib.sha256(handle.encode("utf-8", "surrogatepass")).hexdigest()

    @staticmethod
    def looks_like_handle(value: str) -> bool:
        return value.startswith(_HANDLE_PREFIX) and 8 < len(value) <= 64


def fingerprint(kind: str, payload: Any) -> str:
    """A stable digest of a request, to tell a replay from a reuse of the same idempotency key."""
    canonical = json.dumps([kind, payload], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
