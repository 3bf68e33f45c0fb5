"""The port a user writes for the warehouse (``server.py``): ``make_port`` reads ``WAREHOUSE_ADDRESS``
(``host:port``); ``lose_commit_reply`` and ``system_down`` are its contract fault hooks.

Failures become port errors in one place, :func:`_ask`: a connection that cannot be made, or that
ends before the answer, is ``LegacyTransient`` (nothing was applied), except during COMMIT, where it
is ``LegacyOutcomeUnknown`` (the batch may have been applied); an error answer is ``LegacyFailed``.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from adapter.ports.legacy import (
    BatchStatus,
    CommittedBatch,
    CommittedBatchInfo,
    LegacyFailed,
    LegacyOutcomeUnknown,
    LegacyTransient,
    Record,
    Target,
    VoidResult,
)

ITEMS = Target(
    "items",
    "Stock movements: a SKU and a quantity.",
    {
        "type": "object",
        "properties": {"sku": {"type": "string", "maxLength": 20}, "qty": {"type": "integer", "minimum": 1}},
        "required": ["sku", "qty"],
        "additionalProperties": False,
    },
)


class Connection:
    """One TCP connection to the warehouse, one request at a time."""

    def __init__(self, address: tuple[str, int], timeout: float) -> None:
        try:
            self._socket = socket.create_connection(address, timeout=timeout)
        except OSError as exc:
            raise LegacyTransient(f"warehouse: cannot connect: {type(exc).__name__}") from exc
        self._lines = self._socket.makefile("rb")

    def ask(self, step: str, **request: Any) -> dict[str, Any]:
        return _ask(self, step, request)

    def send(self, request: dict[str, Any]) -> dict[str, Any]:
        self._socket.sendall(json.dumps(request).encode() + b"\n")
        line = self._lines.readline()
        if not line:
            raise ConnectionResetError("the warehouse hung up")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        self._lines.close()
        self._socket.close()


def _ask(connection: Connection, step: str, request: dict[str, Any]) -> dict[str, Any]:
    """Send one request: the one place warehouse failures become port errors."""
    try:
        answer = connection.send({"op": step, **request})
    except (OSError, ValueError) as exc:
        if step == "commit":
            raise LegacyOutcomeUnknown(f"warehouse commit: no answer, it may have applied: {exc!r}") from exc
        raise LegacyTransient(f"warehouse {step}: no answer, nothing applied: {exc!r}") from exc
    if not answer.get("ok"):
        raise LegacyFailed(f"warehouse {step} refused: {answer.get('error')}")
    return answer


class WarehouseSession:
    def __init__(self, port: WarehousePort) -> None:
        self._connection = Connection(port.address, port.timeout)

    def begin(self, batch_ref: str, target: str) -> None:
        self._connection.ask("begin", ref=batch_ref, target=target)

    def add(self, records: Sequence[Record]) -> None:
        self._connection.ask("add", records=[dict(r) for r in records])

    def commit(self) -> CommittedBatch:
        answer = self._connection.ask("commit")
        return CommittedBatch(str(answer["id"]), int(answer["count"]))

    def rollback(self) -> None:
        self._connection.ask("rollback")

    def close(self) -> None:
        self._connection.close()  # the warehouse drops an open batch with its connection


class WarehousePort:
    def __init__(self, address: tuple[str, int], timeout: float = 5.0) -> None:
        self.address, self.timeout = address, timeout

    def targets(self) -> Sequence[Target]:
        return [ITEMS]

    def open_session(self) -> WarehouseSession:
        return WarehouseSession(self)

    def ask(self, step: str, **request: Any) -> dict[str, Any]:
        """One request on a connection of its own (the session-free questions)."""
        connection = Connection(self.address, self.timeout)
        try:
            return connection.ask(step, **request)
        finally:
            connection.close()

    def batch_status(self, batch_ref: str) -> BatchStatus:
        answer = self.ask("status", ref=batch_ref)
        batches = (CommittedBatchInfo(b["id"], int(b["count"]), bool(b["voided"])) for b in answer["batches"])
        return BatchStatus(batch_ref, tuple(batches))

    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        try:
            self.ask("void", id=legacy_batch_id)
        except LegacyFailed as exc:
            if "already_voided" not in str(exc):
                raise
            return VoidResult(legacy_batch_id, already_voided=True)
        return VoidResult(legacy_batch_id, already_voided=False)

    def close(self) -> None:
        """Nothing is held between calls."""


def make_port(settings: Any) -> WarehousePort:
    host, _, port = os.environ["WAREHOUSE_ADDRESS"].rpartition(":")
    return WarehousePort((host, int(port)), timeout=settings.legacy_timeout_seconds)


@contextmanager
def _fault(port: WarehousePort, knob: str) -> Iterator[None]:
    port.ask("faults", **{knob: True})
    try:
        yield
    finally:
        port.ask("faults", **{knob: False})


def lose_commit_reply(port: WarehousePort) -> Any:
    """Contract fault hook: the warehouse applies each COMMIT and hangs up before answering."""
    return _fault(port, "lose_commit_reply")


def system_down(port: WarehousePort) -> Any:
    """Contract fault hook: the warehouse hangs up on every request (an outage)."""
    return _fault(port, "down")
