"""A :class:`~adapter.ports.legacy.LegacyPort` decorator that forwards every call unchanged.

It is the base for a decorator that hooks one or two calls (lose a COMMIT, stop before it, hold a
STATUS answer) and must pass every other call through as it is: subclass, override the hooked
method and call ``super()`` (or ``self._inner``) for the real work. A port subclass opens its own
sessions by overriding :meth:`ForwardingPort.open_session`.
"""

from __future__ import annotations

from collections.abc import Sequence

from adapter.ports.legacy import (
    BatchStatus,
    CommittedBatch,
    LegacyPort,
    LegacySession,
    Record,
    Target,
    VoidResult,
)
from adapter.ports.sessions import add_record_texts, decode_record_texts
from adapter.ports.targets import begin_batch, port_targets

__all__ = ["ForwardingPort", "ForwardingSession"]


class ForwardingSession:
    """A legacy session that passes every call to ``inner``."""

    def __init__(self, inner: LegacySession) -> None:
        self._inner = inner

    def begin(self, batch_ref: str, target: str = "") -> None:
        begin_batch(self._inner, batch_ref, target)

    def add(self, records: Sequence[Record]) -> None:
        self._inner.add(records)

    def add_json(self, texts: Sequence[str]) -> None:
        """The texts as they are when ``inner`` takes them; through ``self.add`` (decoded) when a
        subclass hooks ``add``, so its hook still sees every record."""
        if type(self).add is ForwardingSession.add:
            add_record_texts(self._inner, texts)
        else:
            self.add(decode_record_texts(texts))

    def commit(self) -> CommittedBatch:
        return self._inner.commit()

    def rollback(self) -> None:
        self._inner.rollback()

    def close(self) -> None:
        self._inner.close()


class ForwardingPort:
    """A legacy port that passes every call to ``inner``."""

    def __init__(self, inner: LegacyPort) -> None:
        self._inner = inner

    def open_session(self) -> LegacySession:
        return self._inner.open_session()

    def batch_status(self, batch_ref: str) -> BatchStatus:
        return self._inner.batch_status(batch_ref)

    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        return self._inner.void_batch(legacy_batch_id)

    def targets(self) -> Sequence[Target]:
        return port_targets(self._inner)
