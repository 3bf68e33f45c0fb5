"""The reference :class:`~adapter.ports.legacy.LegacyPort`: the kit's adapter for ``legacy_sim``.

The core never imports ``legacy_sim``; this module (and the demo) does. It wraps either the TCP client
(:meth:`SimulatorPort.tcp`) or the in-process client (:meth:`SimulatorPort.in_process`); both satisfy
``legacy_sim.client.SimClient`` and raise the same exceptions, which are translated to the port's
three outcomes in exactly one place, :func:`_translated`:

===================================  ==========================================================
simulator failure                    port error
===================================  ==========================================================
``ERR TRANSIENT``                    :class:`LegacyTransient` (nothing applied, retry may work)
``ERR STATE|INVALID|NOT_FOUND``      :class:`LegacyFailed` (refused; retrying will not help)
connection lost / timeout, commit    :class:`LegacyOutcomeUnknown` (the commit may have applied)
connection lost, any other step      :class:`LegacyTransient` (nothing was committed)
cannot connect / client closed       :class:`LegacyTransient` (nothing was sent)
===================================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from adapter.legacy.outcomes import Step, batch_status, closing_on_error, refused, where
from adapter.ports.legacy import (
    WILDCARD_TARGET,
    BatchStatus,
    CommittedBatch,
    LegacyOutcomeUnknown,
    LegacyTransient,
    Record,
    Target,
    VoidResult,
)
from legacy_sim.client import ConnectionLostError, LegacyClient, LegacySimError, SimClient
from legacy_sim.engine import LegacyEngine
from legacy_sim.inprocess import InProcessClient
from legacy_sim.protocol import TRANSIENT

__all__ = ["SIMULATOR_TARGETS", "LegacyTarget", "SimulatorPort", "SimulatorSession", "parse_legacy_url"]

SIMULATOR_TARGETS = (
    Target(
        WILDCARD_TARGET,
        "The simulator keeps every batch alike: any target name, any JSON object as a record.",
    ),
)
"""What the simulator accepts, declared like any port's targets: it has no record shapes of its own,
so its one target is the permissive ``*`` (any name, ``{"type": "object"}``)."""


@contextmanager
def _translated(step: Step, context: str = "") -> Iterator[None]:
    """The one place simulator errors become port errors (see the module table)."""
    try:
        yield
    except LegacySimError as exc:
        if exc.code == TRANSIENT:
            raise LegacyTransient(f"{where(step, context)}: {exc}") from exc
        raise refused(step, str(exc), context) from exc
    except ConnectionLostError as exc:
        lost = f"{where(step, context)}: "
        if step == "commit" and exc.request_sent:
            raise LegacyOutcomeUnknown(f"{lost}reply lost, the commit may have applied: {exc}") from exc
        raise LegacyTransient(f"{lost}connection lost, safe to retry: {exc}") from exc


class SimulatorSession:
    """A :class:`~adapter.ports.legacy.LegacySession` over one simulator connection.

    After any error the session closes its connection: the port contract says it is finished.
    """

    def __init__(self, client: SimClient) -> None:
        self._client = client
        self._batch_ref = ""

    def begin(self, batch_ref: str, target: str = "") -> None:
        """The simulator has no targets of its own: every batch goes to the same place (so
        ``target`` is optional here, which keeps wrappers written for ``begin(batch_ref)`` working)."""
        self._batch_ref = batch_ref
        with self._failing_closes("begin"):
            self._client.begin(batch_ref)

    def add(self, records: Sequence[Record]) -> None:
        """Pipelined ADDs; any failing record fails the whole call (and ends the session)."""
        with self._failing_closes("add"):
            self._client.add_many([dict(record) for record in records])

    def add_json(self, texts: Sequence[str]) -> None:
        """Records as the kit staged them (compact JSON object texts): the texts go on the wire as
        they are, with no decode and encode (:class:`~adapter.ports.legacy.JsonRecordSession`)."""
        with self._failing_closes("add"):
            self._client.add_many_json(texts)

    def commit(self) -> CommittedBatch:
        with self._failing_closes("commit"):
            reply = self._client.commit()
        return CommittedBatch(str(reply["legacy_batch_id"]), int(reply["record_count"]))

    def rollback(self) -> None:
        with self._failing_closes("rollback"):
            self._client.rollback()

    def close(self) -> None:
        self._client.close()

    @contextmanager
    def _failing_closes(self, step: Step) -> Iterator[None]:
        context = f"batch_ref={self._batch_ref}" if self._batch_ref else ""
        with closing_on_error(self._client.close), _translated(step, context):
            yield


class SimulatorPort:
    """A :class:`~adapter.ports.legacy.LegacyPort` for the simulator; ``connect`` opens one session."""

    def __init__(self, connect: Callable[[], SimClient], *, description: str = "legacy_sim") -> None:
        self._connect = connect
        self._owned_engine: LegacyEngine | None = None
        self.description = description

    @classmethod
    def tcp(cls, host: str, port: int, timeout: float = 5.0) -> SimulatorPort:
        """Sessions are TCP connections to a running ``python -m legacy_sim serve``."""
        return cls(lambda: LegacyClient(host, port, timeout), description=f"tcp://{host}:{port}")

    @classmethod
    def in_process(cls, engine: LegacyEngine) -> SimulatorPort:
        """Sessions come straight from ``engine`` (no sockets), with the same semantics."""
        return cls(lambda: InProcessClient(engine), description=f"embedded:{engine.db_path}")

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        embedded_db_path: str | Path | None = None,
        timeout: float = 5.0,
        idle_timeout: float | None = None,
    ) -> SimulatorPort:
        """Build from ``tcp://HOST:PORT`` or ``embedded`` (which needs ``embedded_db_path``).

        An embedded engine is owned by the port; :meth:`close` closes it.
        """
        target = parse_legacy_url(url)
        if target.kind == "tcp":
            if target.host is None or target.port is None:
                raise ValueError(f"legacy URL {url!r} names no host and port")
            return cls.tcp(target.host, target.port, timeout)
        if embedded_db_path is None:
            raise ValueError("legacy URL 'embedded' needs a database path for the in-process simulator")
        kwargs: dict[str, Any] = {} if idle_timeout is None else {"idle_timeout": idle_timeout}
        engine = LegacyEngine(embedded_db_path, **kwargs)
        port = cls.in_process(engine)
        port._owned_engine = engine
        return port

    def targets(self) -> Sequence[Target]:
        """:data:`SIMULATOR_TARGETS`: the server publishes them like any port's (``targets://``)."""
        return SIMULATOR_TARGETS

    def open_session(self) -> SimulatorSession:
        """A new connection; one that cannot be made raises LegacyTransient."""
        with _translated("connect", self.description):
            client = self._connect()
        return SimulatorSession(client)

    def batch_status(self, batch_ref: str) -> BatchStatus:
        """STATUS on a short-lived connection; a lost connection raises LegacyTransient."""
        reply = self._one_shot("status", batch_ref, lambda client: client.status(batch_ref))
        committed = reply["batches"]
        return batch_status(
            str(reply["batch_ref"]),
            ((str(b["legacy_batch_id"]), int(b["record_count"]), bool(b["voided"])) for b in committed),
        )

    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        """VOID on a short-lived connection.

        A lost connection raises LegacyTransient even though the VOID may have been applied: VOID is
        idempotent (a repeat answers ``already_voided``), so repeating it is safe, and ``batch_status``
        shows whether it took effect.
        """
        reply = self._one_shot("void", legacy_batch_id, lambda client: client.void(legacy_batch_id))
        return VoidResult(str(reply["legacy_batch_id"]), bool(reply["already_voided"]))

    def close(self) -> None:
        """Close the engine this port owns (only when built by ``from_url('embedded')``)."""
        if self._owned_engine is not None:
            self._owned_engine.close()
            self._owned_engine = None

    def _one_shot(
        self, step: Step, context: str, call: Callable[[SimClient], dict[str, Any]]
    ) -> dict[str, Any]:
        with _translated(step, context):
            client = self._connect()
            try:
                return call(client)
            finally:
                client.close()


@dataclass(frozen=True, slots=True)
class LegacyTarget:
    """A parsed legacy URL: ``kind`` is ``"embedded"`` or ``"tcp"`` (then ``host``/``port`` are set)."""

    kind: Literal["embedded", "tcp"]
    host: str | None = None
    port: int | None = None


def parse_legacy_url(url: str) -> LegacyTarget:
    """Parse ``embedded`` or ``tcp://HOST:PORT``; anything else raises ``ValueError``."""
    text = url.strip()
    if text == "embedded":
        return LegacyTarget("embedded")
    expected = "expected 'embedded' or 'tcp://HOST:PORT'"
    parts = urlsplit(text)
    if parts.scheme != "tcp":
        raise ValueError(f"unsupported legacy URL {url!r}: {expected}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad port in legacy URL {url!r}: {expected} with PORT in 1..65535") from exc
    host = parts.hostname
    if not host or port is None or port == 0:
        raise ValueError(f"legacy URL {url!r} needs a host and a port: {expected}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"legacy URL {url!r} has unexpected parts: {expected}")
    return LegacyTarget("tcp", host, port)


@contextmanager
def lose_commit_reply(port: SimulatorPort) -> Iterator[None]:
    """Contract fault hook: while open, the simulator applies every COMMIT and drops the connection
    before replying (its ``drop_after_commit`` knob, set through the FAULTS command)."""
    with _translated("connect", port.description):
        client = port._connect()
    try:
        client.faults(drop_after_commit=1.0)
        yield
    finally:
        client.faults(drop_after_commit=0.0)
        client.close()


@contextmanager
def system_down(port: SimulatorPort) -> Iterator[None]:
    """Contract fault hook: while open, the simulator refuses every command before doing anything
    (``ERR TRANSIENT``: its ``error_rate`` knob at 1, set through the FAULTS command)."""
    with _translated("connect", port.description):
        client = port._connect()
    try:
        client.faults(error_rate=1.0)
        yield
    finally:
        client.faults(error_rate=0.0)
        client.close()


def from_settings(settings: Any) -> SimulatorPort:
    """The simulator as an ``ADAPTER_LEGACY_PORT`` factory (``adapter.legacy.simulator:from_settings``),
    the same port the kit uses when the setting is unset."""
    return SimulatorPort.from_url(
        settings.legacy_url, embedded_db_path=settings.legacy_db, timeout=settings.legacy_timeout_seconds
    )
