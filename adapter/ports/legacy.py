"""The legacy port: the only way the kit talks to the wrapped system.

A wrapped system is stateful: a *session* opens one batch under a reference, receives records and
commits or rolls back. The kit never imports a concrete system; it receives an object that satisfies
:class:`LegacyPort` from the wiring (``adapter.bootstrap``). The simulator client in
``adapter.legacy.simulator`` is the reference implementation; ``docs/wrap-your-own-system.md`` shows
how to write another.

Errors are the contract that makes safe retries possible, so every implementation must translate its
own failures into exactly one of these three:

* :class:`LegacyFailed`: the system refused the command; nothing was applied, retrying will not help.
  Its subclass :class:`LegacyRefused` carries the reason as a :class:`Refusal` that is safe to show
  (a stable code, the refused record's position, the field, a message without record contents).
* :class:`LegacyTransient`: the command was not applied and may succeed if tried again.
* :class:`LegacyOutcomeUnknown`: the command may or may not have been applied (a lost reply, a
  timeout, a dropped connection after the command was sent).

After any error inside a session, the session is finished: the caller discards it and, if it retries,
starts again in a new session. Uncommitted work in a lost session is gone, which is safe, because only
``commit`` makes anything visible.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

__all__ = [
    "PERMISSIVE_SCHEMA",
    "WILDCARD_TARGET",
    "BatchStatus",
    "CommittedBatch",
    "CommittedBatchInfo",
    "JsonRecordSession",
    "LegacyError",
    "LegacyFailed",
    "LegacyOutcomeUnknown",
    "LegacyPort",
    "LegacyRefused",
    "LegacySession",
    "LegacyTransient",
    "Refusal",
    "Target",
    "TargetCatalog",
    "VoidResult",
]

Record = Mapping[str, Any]


class LegacyError(Exception):
    """Base of the three outcomes a legacy call can fail with."""


class LegacyFailed(LegacyError):
    """The legacy system refused the command; nothing was applied."""


_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_MAX_TEXT = 300


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the legacy system refused, in words that are safe to show the model, an operator and a log.

    * ``code``: stable and machine-readable, lower-case ``snake_case`` (at most 64 characters), chosen
      by the port from a fixed vocabulary (the SQL port uses PostgreSQL's condition names, such as
      ``foreign_key_violation`` or ``numeric_value_out_of_range``, on every database).
    * ``message``: one line for a person, naming what was refused and why, **never a value of the
      record** (no names, amounts or keys): a database's own message often quotes them, so a port
      writes its own. At most 300 characters.
    * ``position``: which record, counted **from 0** in the order the session's ``add`` calls
      received them (the first record of the batch is 0). The kit sends an import's staged records
      in order, so this is the record's position in the import, the same count from 0 as in
      ``validation_error: record N``. ``None`` when the refusal is not about one record (a
      constraint checked at COMMIT, a limit on the whole batch) or the port cannot tell.
    * ``field``: the field (column) at fault, or ``None`` when it is not one field or not known.
    """

    code: str
    message: str
    position: int | None = None
    field: str | None = None

    def __post_init__(self) -> None:
        if not _CODE.fullmatch(self.code):
            raise ValueError(f"a refusal code is lower-case snake_case, at most 64 characters: {self.code!r}")
        if "\n" in self.message or len(self.message) > _MAX_TEXT:
            raise ValueError("a refusal message is one line of at most 300 characters")
        if self.position is not None and self.position < 0:
            raise ValueError("a refusal's position counts from 0")
        if self.field is not None and len(self.field) > _MAX_TEXT:
            raise ValueError("a refusal's field name is at most 300 characters")

    def describe(self) -> str:
        """``record 3, field 'balance': numeric_value_out_of_range: <message>`` (what the exception says)."""
        where = [f"record {self.position}"] if self.position is not None else []
        where += [f"field '{self.field}'"] if self.field is not None else []
        return (", ".join(where) + ": " if where else "") + f"{self.code}: {self.message}"


class LegacyRefused(LegacyFailed):
    """:class:`LegacyFailed` with its reason: ``refusal`` says which record, which field and why.

    Raise it wherever the system refuses for a reason you can name (a record it will not take, a rule
    of its own); plain :class:`LegacyFailed` stays right when you cannot. Everything the kit does with a
    ``LegacyFailed`` applies (nothing was applied, the same records will be refused again); the kit may
    show ``refusal`` to the model and the operator, so it must hold no record contents (see
    :class:`Refusal`).
    """

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.describe())
        self.refusal = refusal


class LegacyTransient(LegacyError):
    """The command was not applied; the same work may succeed in a new attempt."""


class LegacyOutcomeUnknown(LegacyError):
    """The command was sent but its result was lost; it may have been applied."""


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """What the legacy system answered for a successful commit."""

    legacy_batch_id: str
    record_count: int


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """What the legacy system knows about a batch reference.

    ``batches`` lists every committed batch under the reference, oldest first. Because a legacy commit
    is not idempotent, more than one entry means the same work was committed twice.
    """

    batch_ref: str
    batches: tuple[CommittedBatchInfo, ...]

    @property
    def committed(self) -> bool:
        return bool(self.batches)


@dataclass(frozen=True, slots=True)
class CommittedBatchInfo:
    legacy_batch_id: str
    record_count: int
    voided: bool


@dataclass(frozen=True, slots=True)
class VoidResult:
    """Result of reversing a committed batch. ``already_voided`` makes a repeated VOID harmless."""

    legacy_batch_id: str
    already_voided: bool


PERMISSIVE_SCHEMA: Mapping[str, Any] = {"type": "object"}
"""The record schema of a target that declares none: any JSON object."""

WILDCARD_TARGET = "*"
"""A target named ``*`` stands for every name not declared otherwise (the simulator declares one)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where records can go in the legacy system, and what one record must look like.

    ``schema`` is the JSON Schema (draft 2020-12) of one record; the kit validates every record
    against it before staging, so a bad record is refused at ``add`` time with its index and field,
    not at commit time. ``max_records`` bounds the records of one import into this target.
    """

    name: str
    description: str = ""
    schema: Mapping[str, Any] = field(default_factory=lambda: dict(PERMISSIVE_SCHEMA))
    max_records: int | None = None

    @classmethod
    def from_model(
        cls, name: str, model: type[BaseModel], description: str = "", *, max_records: int | None = None
    ) -> Target:
        """A target whose record shape is a pydantic model (its JSON Schema is what the kit checks)."""
        return cls(name, description or (model.__doc__ or "").strip(), model.model_json_schema(), max_records)


@runtime_checkable
class TargetCatalog(Protocol):
    """Optional on a port: the targets it accepts. A port without ``targets()`` accepts any target
    with any JSON object as a record."""

    def targets(self) -> Sequence[Target]:
        """Every target, each with the JSON Schema of one record; called once at start-up."""


@runtime_checkable
class LegacySession(Protocol):
    """One connection-bound legacy session. Not thread-safe; use from one thread at a time."""

    def begin(self, batch_ref: str, target: str) -> None:
        """Open a batch into ``target`` under ``batch_ref`` (an opaque, unique reference chosen by the kit).

        ``target`` is the name the client gave ``begin_import`` (one of the port's targets, if it
        declares them); a port with a single destination may ignore it.
        """

    def add(self, records: Sequence[Record]) -> None:
        """Append records to the open batch, in order.

        Implementations may pipeline. If any record fails, the whole call raises and the session
        must be discarded, because the batch no longer holds a known prefix of the records.
        """

    def commit(self) -> CommittedBatch:
        """Apply the batch. The one irreversible step; a lost reply raises LegacyOutcomeUnknown."""

    def rollback(self) -> None:
        """Drop the open batch. Best effort: a lost session has dropped it already."""

    def close(self) -> None:
        """Release the connection. Uncommitted work is lost."""


@runtime_checkable
class JsonRecordSession(Protocol):
    """Optional on a session: take records as the JSON texts the kit staged, without decoding them.

    Each text is one record, a JSON object in compact form (no line breaks). A session whose wire
    format is JSON can send the texts as they are and save a decode and an encode per record on the
    commit's replay. Same contract as :meth:`LegacySession.add` otherwise (in order; any failure fails
    the whole call and finishes the session). The kit detects the method; a session without it gets
    the records decoded, through ``add``.
    """

    def add_json(self, texts: Sequence[str]) -> None:
        """Append the records whose JSON texts are ``texts`` to the open batch, in order."""


@runtime_checkable
class LegacyPort(Protocol):
    """Factory for sessions plus the session-free questions reconciliation and compensation ask."""

    def open_session(self) -> LegacySession:
        """Open a new session (a new connection for connection-bound systems)."""

    def batch_status(self, batch_ref: str) -> BatchStatus:
        """Ask whether anything was committed under ``batch_ref``."""

    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        """Reverse a committed batch (the compensation). Repeating it is harmless."""
