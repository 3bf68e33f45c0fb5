"""SQLAlchemy 2 models of the durable store. Alembic (the top-level ``migrations/``) shares this metadata.

Times are stored as naive UTC and handed out as aware UTC (:class:`UTCDateTime`), so SQLite and
PostgreSQL behave alike. Natural unique keys make retries safe: a second insert of the same
idempotency key or the same staged position fails instead of doubling.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    and_,
    bindparam,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "OPERATION_BY_KEY",
    "AuditRow",
    "Base",
    "CompensationRow",
    "ConfirmationRoundRow",
    "EventRow",
    "ImportRow",
    "OperationRow",
    "StagedChunkRow",
    "new_event",
    "utcnow",
]

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """The one clock of the store (freezegun-friendly)."""
    return datetime.now(UTC)


def new_event(
    kind: str,
    import_id: str | None,
    operation_id: str | None,
    state: str | None,
    detail: dict[str, Any] | None,
) -> dict[str, Any]:
    """A new event's columns as the store's statement writers take them (``created_at`` is theirs)."""
    return {
        "kind": str(kind),  # a StrEnum as its plain value, for the driver
        "import_id": import_id,
        "operation_id": operation_id,
        "state": state,
        "detail": detail,
    }


def stored_time(value: datetime) -> datetime:
    """A time as the store keeps it: naive UTC. The one conversion on the way in, for the ORM's
    columns (:class:`UTCDateTime`) and the driver's statements (``driver.driver_value``) alike."""
    return value.astimezone(UTC).replace(tzinfo=None)


def loaded_time(value: datetime | str) -> datetime:
    """A stored time as the kit hands it out: aware UTC. The one conversion on the way out, for the
    ORM's columns and the rows of the driver's statements (SQLite's driver gives its text)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC)


class UTCDateTime(TypeDecorator[datetime]):
    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not accepted by the store")
        return stored_time(value)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return None if value is None else loaded_time(value)


# BIGINT on PostgreSQL, INTEGER (the rowid alias, so it autoincrements) on SQLite.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


HOLDING = "staged_bytes > 0 AND state <> 'aborted' AND state <> 'expired'"
"""Imports that hold staged bytes for the tenant's quota (aborted and expired ones dropped theirs).
The store keeps their total per tenant (:class:`TenantHeldBytesRow`), moved by a trigger on
``imports`` that says the same in SQL (migration ``0012``); this predicate is what it is checked
against (``held_bytes.recount_held_bytes``)."""


class ImportRow(Base):
    """One import transaction. The handle itself is never stored, only its digest."""

    __tablename__ = "imports"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    handle_digest: Mapped[str] = mapped_column(String(64), unique=True)
    principal: Mapped[str] = mapped_column(String(200))
    tenant: Mapped[str] = mapped_column(String(200))
    target: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(32))
    record_count: Mapped[int] = mapped_column(Integer, default=0)
    staged_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")  # for quotas
    revision: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Moved by every change of the staged records other than an append (``replace_records``): a
    commit confirmation names it, so a record replaced after the question is never committed unasked."""
    legacy_batch_id: Mapped[str | None] = mapped_column(String(100))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    version: Mapped[int] = mapped_column(Integer, nullable=False)

    __mapper_args__ = {"version_id_col": version}
    __table_args__ = (
        Index("ix_imports_owner_created", "tenant", "principal", "created_at", "id"),
        Index("ix_imports_state_expires", "state", "expires_at"),
        Index("ix_imports_created", "created_at", "id"),
    )


class TenantHeldBytesRow(Base):
    """What a tenant's imports hold against its staged-bytes quota, as of the last fold: with the
    tenant's rows of ``held_bytes_changes`` not folded yet, the sum of ``staged_bytes`` over its
    :data:`HOLDING` imports. Every add reads it, in one primary-key lookup whatever the tenant holds
    (a sum over its imports cost in proportion to them: committed imports hold until the purge)."""

    __tablename__ = "tenant_held_bytes"

    tenant: Mapped[str] = mapped_column(String(200), primary_key=True)
    bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)


class HeldBytesChangeRow(Base):
    """What a tenant's imports gained or lost since the last fold, by one database connection (its
    PostgreSQL backend pid; 0 on SQLite, which has one writer): the trigger on ``imports`` adds an
    import's change of share (its ``staged_bytes`` while it is :data:`HOLDING`, else 0) to the row
    of the connection that made it. A connection only changes its own row, so concurrent adds of a
    tenant wait on no shared row; maintenance folds the rows into :class:`TenantHeldBytesRow`
    every pass (``held_bytes.fold_held_bytes``), so a tenant has about one per busy connection."""

    __tablename__ = "held_bytes_changes"
    # A tenth-full page on PostgreSQL: the connections' rows spread over several pages instead of
    # sharing one that every add's update would lock in turn.
    __table_args__ = {"postgresql_with": {"fillfactor": 10}}

    tenant: Mapped[str] = mapped_column(String(200), primary_key=True)
    backend: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    change: Mapped[int] = mapped_column(BigInteger, nullable=False)


class StagedChunkRow(Base):
    """The records of one add, waiting for commit: their compact JSON texts in the caller's order,
    joined by newlines (compact JSON never holds a raw newline, ``store/staged.py``), at positions
    ``first_seq .. last_seq`` of the import.

    One row per add, not per record: a row costs PostgreSQL a heap tuple, an index entry and a WAL
    record whatever its size, so a hundred records in one row cost about a third of a hundred rows
    (issue 25, ``bench/RESULTS.md``). Keyed by the last position, so reads walk the chunks in order
    from any position (``last_seq > after``). No surrogate id and no foreign key: staging is the hot
    write path; the import row is locked while its records are staged, and every delete of an
    import deletes its records first (RetentionRepository).
    """

    __tablename__ = "staged_chunks"

    import_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    last_seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    first_seq: Mapped[int] = mapped_column(Integer)
    data: Mapped[str] = mapped_column(Text)


class OperationRow(Base):
    """One call with an effect (begin, add, commit, abort, compensate) and its durable outcome."""

    __tablename__ = "operations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    principal: Mapped[str] = mapped_column(String(200))
    tenant: Mapped[str] = mapped_column(String(200))
    import_id: Mapped[str | None] = mapped_column(ForeignKey("imports.id", ondelete="SET NULL"))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    request_fingerprint: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(32))
    batch_ref: Mapped[str | None] = mapped_column(String(128), unique=True)
    recovery_point: Mapped[str | None] = mapped_column(String(64))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    records_sent: Mapped[int | None] = mapped_column(Integer)
    """A running commit's progress as of its last lease renewal (what another worker can report)."""
    stop_requested: Mapped[str | None] = mapped_column(String(16))
    """``cancel`` or ``abort`` once the owner asked a running commit to stop (``StopRequest``)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    version: Mapped[int] = mapped_column(Integer, nullable=False)

    __mapper_args__ = {"version_id_col": version}
    __table_args__ = (
        UniqueConstraint("tenant", "principal", "kind", "idempotency_key"),
        Index("ix_operations_status_lease", "status", "lease_expires_at"),
        Index("ix_operations_import", "import_id", "created_at"),
        Index("ix_operations_created", "created_at", "id"),
        # The admin list filtered by status, newest first, in index order: without it SQLite (no
        # statistics) read every operation of the status and sorted them (issue 25, bench/history.py).
        Index("ix_operations_status_created", "status", "created_at", "id"),
        # What changed lately: the late-commit watch's window, the purge's cut-off. Without it both
        # read every operation ever kept (issue 25, bench/history.py).
        Index("ix_operations_updated", "updated_at"),
        # Only operations with a stop request: maintenance looks for aborts a crash left behind.
        Index(
            "ix_operations_stop_requested",
            "stop_requested",
            postgresql_where=text("stop_requested IS NOT NULL"),
            sqlite_where=text("stop_requested IS NOT NULL"),
        ),
    )


# An operation by its idempotency key (the unique key above), with the values bound at execution:
# the staging's column read and the operations repository's ORM read ask the same.
OPERATION_BY_KEY = and_(
    OperationRow.tenant == bindparam("tenant"),
    OperationRow.principal == bindparam("principal"),
    OperationRow.kind == bindparam("kind"),
    OperationRow.idempotency_key == bindparam("key"),
)


class CompensationRow(Base):
    """The reversal of a committed legacy batch, kept so compensation is resumable and auditable."""

    __tablename__ = "compensations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    import_id: Mapped[str] = mapped_column(ForeignKey("imports.id", ondelete="CASCADE"))
    operation_id: Mapped[str] = mapped_column(ForeignKey("operations.id", ondelete="CASCADE"))
    legacy_batch_id: Mapped[str] = mapped_column(String(100), unique=True)
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(String(500))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class AuditRow(Base):
    """Who did what to an operation, when and why: every operator action, whatever its outcome."""

    __tablename__ = "audit_records"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    operation_id: Mapped[str] = mapped_column(String(32), index=True)
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(String(1000))
    outcome: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ConfirmationRoundRow(Base):
    """The first answer to one confirmation round: a round is answered once, in every worker.

    A replayed ``requestState`` is checked against it, so an answer cannot be changed afterwards
    (a ``decline`` replayed as ``accept`` commits nothing). Holds ids and the decision only.
    """

    __tablename__ = "confirmation_rounds"

    round_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    principal: Mapped[str] = mapped_column(String(200))
    tenant: Mapped[str] = mapped_column(String(200))
    import_id: Mapped[str] = mapped_column(String(32))
    decision: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class EventRow(Base):
    """An append-only record of each state change, written in the same transaction as the change.

    Subscriptions and the admin history read it. ``detail`` holds counts and ids only, never record
    contents or user input.
    """

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    import_id: Mapped[str | None] = mapped_column(String(32), index=True)
    operation_id: Mapped[str | None] = mapped_column(String(32), index=True)
    kind: Mapped[str] = mapped_column(String(64))
    state: Mapped[str | None] = mapped_column(String(32))
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class OperatorSessionRow(Base):
    """A dashboard login: the cookie holds a random id, the store only its SHA-256 (a database copy
    holds no usable session). Logout deletes the row; an expired row is refused and purged."""

    __tablename__ = "operator_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
