"""A :class:`~adapter.ports.legacy.LegacyPort` decorator that times every call to the legacy system.

It wraps any port (and the sessions it opens) and reports each call as
``observe(command, seconds, outcome)`` to the observers registered on it, so metrics (or anything
else) can be fed without this package knowing about Prometheus. ``command`` is the port or session
method (``open_session``, ``batch_status``, ``void_batch``, ``begin``, ``add``, ``commit``,
``rollback``, ``close``); ``outcome`` is ``ok``, ``failed``, ``transient``, ``outcome_unknown`` or
``error`` (anything that is not a :class:`~adapter.ports.legacy.LegacyError`). Errors are re-raised
unchanged: the decorator never alters what the wrapped port does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from adapter.legacy.forwarding import ForwardingPort, ForwardingSession
from adapter.legacy.outcomes import outcome_of
from adapter.ports.legacy import (
    BatchStatus,
    CommittedBatch,
    LegacyPort,
    LegacySession,
    Record,
    VoidResult,
)
from adapter.ports.sessions import add_record_texts

__all__ = ["InstrumentedPort", "InstrumentedSession", "Observer"]

Observer = Callable[[str, float, str], None]
"""``observe(command, seconds, outcome)``; must be quick and must not raise (errors are logged)."""

log = logging.getLogger("adapter.legacy.instrumented")


class _Observers:
    def __init__(self, observers: Sequence[Observer] = ()) -> None:
        self._observers: list[Observer] = list(observers)

    def add(self, observer: Observer) -> Callable[[], None]:
        """Register ``observer``; returns a function that removes it again."""
        self._observers.append(observer)

        def remove() -> None:
            if observer in self._observers:
                self._observers.remove(observer)

        return remove

    def notify(self, command: str, seconds: float, outcome: str) -> None:
        for observer in tuple(self._observers):
            try:
                observer(command, seconds, outcome)
            except Exception:  # an observer must never break a legacy call
                log.exception("legacy call observer failed")

    @contextmanager
    def timed(self, command: str) -> Iterator[None]:
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            error = exc
            raise
        finally:
            self.notify(command, time.perf_counter() - started, outcome_of(error))


class InstrumentedSession(ForwardingSession):
    """A session whose every command is timed; see :class:`InstrumentedPort`."""

    def __init__(self, inner: LegacySession, observers: _Observers) -> None:
        super().__init__(inner)
        self.inner = inner
        self._observers = observers

    def begin(self, batch_ref: str, target: str = "") -> None:
        """``target`` defaults to "" for callers of the first protocol version (``begin(batch_ref)``)."""
        with self._observers.timed("begin"):
            super().begin(batch_ref, target)

    def add(self, records: Sequence[Record]) -> None:
        with self._observers.timed("add"):
            super().add(records)

    def add_json(self, texts: Sequence[str]) -> None:
        """Timed as ``add``: the same command to the legacy system, with records as JSON texts."""
        with self._observers.timed("add"):
            add_record_texts(self.inner, texts)

    def commit(self) -> CommittedBatch:
        with self._observers.timed("commit"):
            return super().commit()

    def rollback(self) -> None:
        with self._observers.timed("rollback"):
            super().rollback()

    def close(self) -> None:
        with self._observers.timed("close"):
            super().close()

    def __getattr__(self, name: str) -> Any:  # anything beyond the protocol, untimed
        return getattr(self.inner, name)


class InstrumentedPort(ForwardingPort):
    """Wraps ``inner`` so that each legacy call is reported to the registered observers.

    Its targets are the wrapped port's, untimed (asked once at start-up).

    >>> port = InstrumentedPort(SimulatorPort.tcp(host, port))          # doctest: +SKIP
    >>> remove = port.add_observer(lambda cmd, s, outcome: print(cmd, s, outcome))  # doctest: +SKIP
    """

    def __init__(self, inner: LegacyPort, observe: Observer | None = None) -> None:
        super().__init__(inner)
        self.inner = inner
        self._observers = _Observers([observe] if observe is not None else [])

    def add_observer(self, observe: Observer) -> Callable[[], None]:
        return self._observers.add(observe)

    def open_session(self) -> LegacySession:
        with self._observers.timed("open_session"):
            session = super().open_session()
        return InstrumentedSession(session, self._observers)

    def batch_status(self, batch_ref: str) -> BatchStatus:
        with self._observers.timed("batch_status"):
            return super().batch_status(batch_ref)

    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        with self._observers.timed("void_batch"):
            return super().void_batch(legacy_batch_id)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def __getattr__(self, name: str) -> Any:  # e.g. a concrete port's extras, untimed
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"InstrumentedPort({self.inner!r})"
