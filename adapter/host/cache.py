"""A cache for list and read results that honours the server's ``ttlMs`` and ``cacheScope``.

Keys are composite: server, method, target, and for ``private`` results also principal and tenant, so
one user's private list is never served to another. A hit is only served after the caller re-checked
the policy (see :meth:`adapter.host.Host.read_resource`); listen-stream events invalidate entries,
and a lost stream drops everything of that server (the host re-reads from the source).
"""

from __future__ import annotations

import time
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


@dataclass
class ResultCache:
    clock: Callable[[], float] = time.monotonic
    _items: dict[CacheKey, _Item] = field(default_factory=dict)

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
                continue
            return item.value
        return None

    def put(self, key: CacheKey, value: Any, ttl_ms: int | None) -> None:
        """Stores only what the server said may be reused (a positive ``ttlMs``)."""
        if ttl_ms and ttl_ms > 0:
            self._items[key] = _Item(value, self.clock() + ttl_ms / 1000)

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
