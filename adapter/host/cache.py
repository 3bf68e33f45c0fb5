"""A cache for list and read results that honours ``ttlMs``, ``cacheScope`` and the host's retention.

Keys are composite: server, method, target, and for ``private`` results also principal and tenant, so
one user's private list is never served to another. Neither ``ttlMs`` nor ``cacheScope`` makes an
entry public to everyone: a hit is only served after the caller re-checked the policy *and* that the
principal could fetch it themselves (credentials for that server; see
:meth:`adapter.host.Host.read_resource`). Listen-stream events invalidate entries, and a lost stream
drops everything of that server (the host re-reads from the source).

Retention: every entry carries the retention class of its server's rule and is deleted when that
class's time is up even if ``ttlMs`` allows longer (``Retention.NONE``: never stored). The whole
cache is bounded in bytes (``max_bytes``): the oldest entries go first. ``forget(principal)`` deletes
what was cached for one principal (sign-out).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CacheKey", "ResultCache"]


@dataclass(frozen=True)
class CacheKey:
    server: str
    method: str
    target: str
    principal: str | None
    tenant: str | None


@dataclass
class _Item:
    value: Any
    expires: float
    size: int
    retention: str


def _size(value: Any) -> int:
    dump = getattr(value, "model_dump_json", None)
    return len(dump()) if callable(dump) else len(repr(value))


@dataclass
class ResultCache:
    clock: Callable[[], float] = time.monotonic
    max_bytes: int = 8 * 1024 * 1024
    _items: OrderedDict[CacheKey, _Item] = field(default_factory=OrderedDict)
    evicted: int = 0  # entries dropped for the size bound
    expired: int = 0  # entries dropped by ttlMs or retention

    @staticmethod
    def key(server: str, method: str, target: str, principal: str, tenant: str, scope: str) -> CacheKey:
        """Public results are shared per server; anything else is bound to principal and tenant."""
        if scope == "public":
            return CacheKey(server, method, target, None, None)
        return CacheKey(server, method, target, principal, tenant)

    def get(self, server: str, method: str, target: str, principal: str, tenant: str) -> Any | None:
        for scope in ("private", "public"):
            k = self.key(server, method, target, principal, tenant, scope)
            item = self._items.get(k)
            if item is None:
                continue
            if item.expires <= self.clock():
                del self._items[k]
                self.expired += 1
                continue
            return item.value
        return None

    def put(
        self,
        key: CacheKey,
        value: Any,
        ttl_ms: int | None,
        *,
        retention_seconds: float | None = None,
        retention: str = "standard",
    ) -> None:
        """Stores only what the server said may be reused (a positive ``ttlMs``), for no longer than
        the retention class allows, and within the size bound."""
        if not ttl_ms or ttl_ms <= 0 or retention_seconds == 0:
            return
        lifetime = ttl_ms / 1000
        if retention_seconds is not None:
            lifetime = min(lifetime, retention_seconds)
        size = _size(value)
        if size > self.max_bytes:
            return
        self._items.pop(key, None)
        self._items[key] = _Item(value, self.clock() + lifetime, size, retention)
        while self.size > self.max_bytes:
            self._items.popitem(last=False)
            self.evicted += 1

    @property
    def size(self) -> int:
        return sum(item.size for item in self._items.values())

    def sweep(self) -> int:
        """Delete every entry whose time (ttlMs or retention) is up; returns how many."""
        now = self.clock()
        doomed = [k for k, item in self._items.items() if item.expires <= now]
        for k in doomed:
            del self._items[k]
        self.expired += len(doomed)
        return len(doomed)

    def forget(self, principal: str, tenant: str) -> int:
        """Delete everything cached for one principal (e.g. when they sign out)."""
        doomed = [k for k in self._items if (k.principal, k.tenant) == (principal, tenant)]
        for k in doomed:
            del self._items[k]
        return len(doomed)

    def retention_of(self, key: CacheKey) -> str | None:
        item = self._items.get(key)
        return item.retention if item is not None else None

    def invalidate(self, server: str, *, target: str | None = None, method: str | None = None) -> int:
        doomed = [
            k
            for k in self._items
            if k.server == server
            and (target is None or k.target == target)
            and (method is None or k.method == method)
        ]
        for k in doomed:
            del self._items[k]
        return len(doomed)

    def __len__(self) -> int:
        return len(self._items)
