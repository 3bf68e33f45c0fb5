"""The SQL of the add path (and of begin): prebuilt Core statements instead of ORM objects.

``add_records`` is the call a host makes most after the status poll, with up to a thousand records
each time. Through the ORM its fixed cost (an operation inserted then updated, the import loaded,
flushed and version-checked, two event objects, three flushes) was about 3 ms of CPU per call before
a single record was written, and the ORM's bulk insert added about 2 us per record. Here every
statement is built once; an add's records are one row, a chunk (``staged.py``), whatever their
number. On PostgreSQL an add is one
statement (data-modifying CTEs): its ``UPDATE ... RETURNING`` finds, locks and moves the import's
counters and reads what its tenant holds, and the same statement writes the records, the finished
operation and its events; the rules run on what it returns, and a refusal rolls all of it back. On
SQLite the rules run between a read and the writes. Begin is the import's INSERT (counting the
principal's open imports on PostgreSQL) and one operation-and-events statement. On PostgreSQL both
can also be written by one statement outside a transaction that holds their rules in its ``WHERE``
(``add_if_allowed``, ``begin_if_allowed``): it writes all or nothing, and the caller takes the
checked transaction where it wrote nothing. The rules stay in the services (``staging.py``,
``imports.py``); this module only reads and writes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Insert,
    Integer,
    Select,
    String,
    Table,
    Text,
    and_,
    bindparam,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.orm import Session

from adapter.domain.errors import StoreConflict
from adapter.store.driver import event_values, run_on_driver
from adapter.store.held_bytes import held_bytes_of
from adapter.store.notify import remember_events
from adapter.store.staged import join_records
from adapter.store.tables import (
    OPERATION_BY_KEY,
    EventRow,
    ImportRow,
    OperationRow,
    StagedChunkRow,
    loaded_time,
    utcnow,
)

__all__ = [
    "AddAhead",
    "AddLimits",
    "AddTarget",
    "FinishedOperation",
    "KeyedOperation",
    "NewImport",
    "NewRecords",
    "StagingRepository",
    "add_if_allowed",
    "begin_if_allowed",
]

_imports = cast(Table, ImportRow.__table__)
_operations = cast(Table, OperationRow.__table__)
_events = cast(Table, EventRow.__table__)
_chunks = cast(Table, StagedChunkRow.__table__)

# What the tenant's imports hold (for its quota: its kept total and the changes not folded yet,
# ``held_bytes.py``), read in the add's own statement: no second checkout or round trip.
_HELD = held_bytes_of(bindparam("of_tenant"))
_TENANT_BYTES = _HELD.label("tenant_bytes")
_ADD_COLUMNS = (
    _imports.c.id,
    _imports.c.principal,
    _imports.c.tenant,
    _imports.c.target,
    _imports.c.state,
    _imports.c.record_count,
    _imports.c.staged_bytes,
    _imports.c.expires_at,
    _imports.c.version,
    _TENANT_BYTES,
)
_IMPORT = select(*_ADD_COLUMNS).where(_imports.c.handle_digest == bindparam("digest"))

# PostgreSQL: the statement that finds (and locks) the import also moves its counters. RETURNING
# gives the values after the change, and the tenant's holding as of the statement's snapshot (before
# it: the trigger's change for this add comes after).
_MOVE_COUNTERS = (
    update(_imports)
    .where(_imports.c.handle_digest == bindparam("digest"))
    .values(
        record_count=_imports.c.record_count + bindparam("records"),
        staged_bytes=func.coalesce(_imports.c.staged_bytes, 0) + bindparam("size"),
        version=_imports.c.version + 1,
        updated_at=bindparam("now"),
    )
)
_CLAIM_BY_DIGEST = _MOVE_COUNTERS.returning(*_ADD_COLUMNS)

# PostgreSQL, an add on its own (autocommit, ``StagingRepository`` is not involved): the same
# statement, but it finds the import only where every rule of the add holds, so it either writes
# the whole add or nothing; the caller then takes the checked path, which names the refusal.
_mine_already = _operations.alias("already")
_KEY_UNUSED = or_(
    bindparam("a_key", type_=String).is_(None),
    ~exists().where(
        _mine_already.c.tenant == bindparam("of_tenant"),
        _mine_already.c.principal == bindparam("a_principal", type_=String),
        _mine_already.c.kind == bindparam("a_kind", type_=String),
        _mine_already.c.idempotency_key == bindparam("a_key", type_=String),
    ),
)
# The rules are one condition ``(... AND ...) IS true``, which no index can serve: the statement is
# prepared and PostgreSQL soon plans it once for any values (a generic plan), and given the state and
# expiry as separate terms, that plan read the open imports along ``ix_imports_state_expires`` to
# find one digest (every open import, each add). The import is found by its digest's unique index.
_ADD_RULES = and_(
    _imports.c.principal == bindparam("a_principal", type_=String),
    _imports.c.tenant == bindparam("of_tenant"),
    _imports.c.state == bindparam("open_state"),
    _imports.c.expires_at > bindparam("valid_at"),
    _imports.c.record_count + bindparam("records") <= bindparam("max_records"),
    func.coalesce(_imports.c.staged_bytes, 0) + bindparam("size") <= bindparam("max_bytes"),
    _HELD + bindparam("size") <= bindparam("max_tenant_bytes"),
    _KEY_UNUSED,
)
# Its RETURNING leaves the tenant's holding out: the rules have checked it, and a second use of the
# subquery would be a second read.
_CLAIM_IF_ALLOWED = _MOVE_COUNTERS.where(_ADD_RULES.is_(true())).returning(
    _imports.c.id, _imports.c.tenant, _imports.c.record_count
)

_CLAIM = (
    update(_imports)
    .where(_imports.c.id == bindparam("import_id"), _imports.c.version == bindparam("old_version"))
    .values(
        record_count=bindparam("record_count"),
        staged_bytes=bindparam("staged_bytes"),
        version=bindparam("new_version"),
        updated_at=bindparam("now"),
    )
)

_BY_KEY = select(
    _operations.c.id, _operations.c.import_id, _operations.c.request_fingerprint, _operations.c.result
).where(OPERATION_BY_KEY)

# begin: how many open, unexpired imports the principal has (its quota), read by the statement that
# inserts the new one on PostgreSQL (RETURNING sees the snapshot before the insert), alone on SQLite.
_mine = _imports.alias("mine")
_OPEN_IMPORTS = (
    select(func.count())
    .select_from(_mine)
    .where(
        _mine.c.tenant == bindparam("of_tenant"),
        _mine.c.principal == bindparam("of_principal"),
        _mine.c.state == bindparam("open_state"),
        _mine.c.expires_at > bindparam("now"),
    )
)
_NEW_IMPORT_COLUMNS = (
    "id",
    "handle_digest",
    "principal",
    "tenant",
    "target",
    "state",
    "record_count",
    "staged_bytes",
    "revision",
    "expires_at",
    "created_at",
    "updated_at",
    "version",
)
_NEW_IMPORT = insert(_imports).values({name: bindparam(name) for name in _NEW_IMPORT_COLUMNS})
_NEW_IMPORT_COUNTED = _NEW_IMPORT.returning(_OPEN_IMPORTS.scalar_subquery().label("open_before"))

_OPERATION = insert(_operations)
_EVENTS_NO_IDS = insert(_events)
_OPERATION_COLUMNS = (
    "id",
    "kind",
    "principal",
    "tenant",
    "import_id",
    "idempotency_key",
    "request_fingerprint",
    "status",
    "result",
    "attempts",
    "created_at",
    "updated_at",
    "version",
)
_EVENT_COLUMNS = ("import_id", "operation_id", "kind", "state", "detail", "created_at")

_NEW_CHUNK = insert(_chunks)


@dataclass(frozen=True, slots=True)
class AddTarget:
    """What the add path reads of an import (the columns its rules need, no ORM identity) as it was
    before this add, and what the caller's tenant holds in all (``tenant_bytes``, for its quota)."""

    id: str
    principal: str
    tenant: str
    target: str
    state: str
    record_count: int
    staged_bytes: int
    expires_at: datetime
    version: int
    tenant_bytes: int
    written: bool = False
    """PostgreSQL: the statement that held the import also moved its counters and wrote the add
    (``AddAhead``); SQLite: the caller does both once its rules have passed (:meth:`claim`)."""


@dataclass(frozen=True, slots=True)
class NewRecords:
    """Records to stage with an outcome: their JSON texts, at ``first_seq, first_seq + 1, ...``."""

    import_id: str
    first_seq: int
    texts: Sequence[str] = field(repr=False)


@dataclass(frozen=True, slots=True)
class AddAhead:
    """An add to write with the statement that holds its import (PostgreSQL, :meth:`StagingRepository.
    hold_for_add`): what is known before the import is read. The operation's result and the staged
    event's detail are the import's new counters, computed by that statement the way
    ``services/staging.py`` computes them on SQLite."""

    operation_id: str
    kind: str
    principal: str
    key: str | None
    fingerprint: str
    status: str
    staged_event: tuple[str, str]  # (kind, state) of the event that says the records were staged
    done_event: tuple[str, str, dict[str, Any]]  # (kind, state, detail) of the operation's own event
    texts: Sequence[str] = field(repr=False)


@dataclass(frozen=True, slots=True)
class KeyedOperation:
    """An operation found by its idempotency key: enough to tell a replay from a reuse and answer it."""

    id: str
    import_id: str | None
    request_fingerprint: str
    result: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class NewImport:
    """An import to open (begin): its row's values, all known before it is written."""

    id: str
    handle_digest: str
    principal: str
    tenant: str
    target: str
    state: str
    expires_at: datetime

    def row(self) -> dict[str, Any]:
        """Its columns as the statements write them (``_NEW_IMPORT_COLUMNS``), created now."""
        created = utcnow()
        return {
            "id": self.id,
            "handle_digest": self.handle_digest,
            "principal": self.principal,
            "tenant": self.tenant,
            "target": self.target,
            "state": self.state,
            "record_count": 0,
            "staged_bytes": 0,
            "revision": 0,
            "expires_at": self.expires_at,
            "created_at": created,
            "updated_at": created,
            "version": 1,
        }


@dataclass(frozen=True, slots=True)
class FinishedOperation:
    """A call that took effect at once (begin, add, replace), as it is written: its operation,
    already finished (not an insert and an update), and its events (each a dict of ``kind``,
    ``import_id``, ``operation_id``, ``state``, ``detail``: ``tables.new_event``)."""

    id: str
    kind: str
    principal: str
    tenant: str
    import_id: str
    key: str | None
    fingerprint: str
    status: str
    result: dict[str, Any]
    events: Sequence[dict[str, Any]]

    def rows(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Its operation's columns and its events', all written now."""
        now = utcnow()
        operation = {
            "id": self.id,
            "kind": self.kind,
            "principal": self.principal,
            "tenant": self.tenant,
            "import_id": self.import_id,
            "idempotency_key": self.key,
            "request_fingerprint": self.fingerprint,
            "status": self.status,
            "result": self.result,
            "attempts": 1,
            "created_at": now,
            "updated_at": now,
            "version": 1,
        }
        return operation, [{"created_at": now} | event for event in self.events]

    def params(self) -> dict[str, Any]:
        """The values of the statements that write it on PostgreSQL: ``op_<column>`` for the
        operation and ``e<i>_<column>`` for its events."""
        operation, events = self.rows()
        return {f"op_{name}": value for name, value in operation.items()} | event_values(events)


class StagingRepository:
    """The add path inside one unit of work: every statement runs on its session's connection."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def hold_for_add(
        self, handle_digest: str, tenant: str, records: int, size: int, ahead: AddAhead
    ) -> AddTarget | None:
        """The import with this digest, its row held until the transaction ends, as it was before an
        add of ``records`` records of ``size`` bytes, with what ``tenant``'s imports hold in all.

        On PostgreSQL one ``UPDATE ... RETURNING`` finds, locks and moves the counters at once,
        instead of a ``SELECT ... FOR UPDATE`` and a version-checked ``UPDATE``: the caller's rules
        run after it, and a refusal rolls the transaction back, so it changes nothing. On SQLite
        (``BEGIN IMMEDIATE`` already serialises writers) it is a read, and :meth:`claim` moves the
        counters once the rules have passed.

        On PostgreSQL that same statement also writes the add itself, ``ahead`` (its records, its
        finished operation and its events; ``written`` on the answer): an add is one statement. A
        refusal rolls it all back, so a refused add costs what an accepted one does, once.
        """
        connection = self._session.connection()
        params: dict[str, Any] = {"digest": handle_digest, "of_tenant": tenant}
        if connection.dialect.name == "postgresql":
            params |= {"records": records, "size": size, "now": utcnow()}
            found = run_on_driver(connection, _ADD_AT_ONCE, params | _ahead_params(ahead, records))
            if not found:
                return None
            first = found[0]
            id_, principal, row_tenant, target, state, count, staged, expires_at, version, held = first[:10]
            remember_events(self._session, first[10])
            return AddTarget(
                id_,
                principal,
                row_tenant,
                target,
                state,
                count - records,
                staged - size,
                loaded_time(expires_at),
                version - 1,
                int(held),
                written=True,
            )
        row = connection.execute(_IMPORT, params).first()
        if row is None:
            return None
        return AddTarget(
            row.id,
            row.principal,
            row.tenant,
            row.target,
            row.state,
            row.record_count,
            row.staged_bytes or 0,
            row.expires_at,
            row.version,
            int(row.tenant_bytes),
        )

    def open_import(self, new: NewImport, now: datetime) -> int:
        """Insert ``new``; returns how many imports in its state unexpired at ``now`` the principal
        had before it (for its quota: the caller checks it after, and a refusal rolls the insert
        back). One ``INSERT ... RETURNING`` on PostgreSQL; a count, then the insert, on SQLite (whose
        RETURNING would count the new row too)."""
        row = new.row()
        count = {"of_tenant": new.tenant, "of_principal": new.principal, "open_state": new.state, "now": now}
        connection = self._session.connection()
        if connection.dialect.name == "postgresql":
            return int(run_on_driver(connection, _NEW_IMPORT_COUNTED, row | count)[0][0])
        before = int(connection.execute(_OPEN_IMPORTS, count).scalar_one())
        connection.execute(_NEW_IMPORT, row)
        return before

    def operation_by_key(self, tenant: str, principal: str, kind: str, key: str) -> KeyedOperation | None:
        row = (
            self._session.connection()
            .execute(_BY_KEY, {"tenant": tenant, "principal": principal, "kind": kind, "key": key})
            .first()
        )
        if row is None:
            return None
        return KeyedOperation(row.id, row.import_id, row.request_fingerprint, row.result)

    def claim(self, row: AddTarget, record_count: int, staged_bytes: int) -> None:
        """Move the import's counters, if nobody changed it since it was read (its version): SQLite,
        where :meth:`hold_for_add` only read it."""
        result = self._session.connection().execute(
            _CLAIM,
            {
                "import_id": row.id,
                "old_version": row.version,
                "new_version": row.version + 1,
                "record_count": record_count,
                "staged_bytes": staged_bytes,
                "now": utcnow(),
            },
        )
        if result.rowcount != 1:
            raise StoreConflict()

    def record_outcome(self, operation: FinishedOperation, records: NewRecords | None = None) -> None:
        """Insert the finished ``operation`` with its events, and the ``records`` given (the add path
        on SQLite; on PostgreSQL an add writes all of it with its import, ``hold_for_add``).

        On PostgreSQL that is one statement (data-modifying CTEs). Other workers are told the event
        ids after the commit (``notify.py``).
        """
        connection = self._session.connection()
        if records is not None:
            connection.execute(_NEW_CHUNK, _chunk_row(records))
        if connection.dialect.name != "postgresql":
            operation_row, event_rows = operation.rows()
            connection.execute(_OPERATION, operation_row)
            connection.execute(_EVENTS_NO_IDS, event_rows)
            return
        # A statement with data-modifying CTEs: SQLAlchemy would compile it on every call (driver.py).
        ids = run_on_driver(connection, _outcome_statement(len(operation.events)), operation.params())
        remember_events(self._session, [row[0] for row in ids])


def _chunk_row(records: NewRecords) -> dict[str, Any]:
    """The row of a chunk of ``records`` (``StagedChunkRow``)."""
    first_seq = records.first_seq
    last_seq = first_seq + len(records.texts) - 1
    data = join_records(records.texts)
    return {"import_id": records.import_id, "first_seq": first_seq, "last_seq": last_seq, "data": data}


def _ahead_params(ahead: AddAhead, records: int) -> dict[str, Any]:
    now = utcnow()
    staged_kind, staged_state = ahead.staged_event
    done_kind, done_state, done_detail = ahead.done_event
    return {
        "a_count": records,
        "a_data": join_records(ahead.texts),
        "a_operation_id": ahead.operation_id,
        "a_kind": ahead.kind,
        "a_principal": ahead.principal,
        "a_key": ahead.key,
        "a_fingerprint": ahead.fingerprint,
        "a_status": ahead.status,
        "a_now": now,
        "a_staged_kind": staged_kind,
        "a_staged_state": staged_state,
        "a_done_kind": done_kind,
        "a_done_state": done_state,
        "a_done_detail": done_detail,
    }


def _add_at_once(claim: Any) -> Any:
    """``WITH claimed AS (UPDATE imports ... RETURNING ...), new_records AS (INSERT INTO staged_chunks
    ... FROM claimed), new_operation AS (INSERT ... FROM claimed), noted AS (INSERT INTO events ... FROM
    claimed RETURNING id) SELECT claimed.*, ARRAY(SELECT id FROM noted) FROM claimed``: nothing is
    written when ``claim`` finds no import (none has the digest, or, for ``_CLAIM_IF_ALLOWED``, a
    rule does not hold), since ``claimed`` is empty then."""
    claimed = claim.cte("claimed")
    count = bindparam("a_count", type_=Integer)
    first_seq = claimed.c.record_count - count + 1  # the counters are the new ones here
    new_records = insert(_chunks).from_select(
        ["import_id", "last_seq", "first_seq", "data"],
        select(claimed.c.id, claimed.c.record_count, first_seq, bindparam("a_data", type_=Text)).select_from(
            claimed
        ),
    )
    result = func.json_build_object(
        literal_column("'accepted'"),
        count,
        literal_column("'record_count'"),
        claimed.c.record_count,
        literal_column("'first_seq'"),
        first_seq,
    )
    staged_detail = func.json_build_object(
        literal_column("'accepted'"), count, literal_column("'record_count'"), claimed.c.record_count
    )
    now = bindparam("a_now", type_=_operations.c.created_at.type)
    operation_id = bindparam("a_operation_id", type_=String)
    new_operation = insert(_operations).from_select(
        list(_OPERATION_COLUMNS),
        select(
            operation_id,
            bindparam("a_kind", type_=String),
            bindparam("a_principal", type_=String),
            claimed.c.tenant,
            claimed.c.id,
            bindparam("a_key", type_=String),
            bindparam("a_fingerprint", type_=String),
            bindparam("a_status", type_=String),
            result,
            literal_column("1"),
            now,
            now,
            literal_column("1"),
        ).select_from(claimed),
    )
    events = union_all(
        select(
            claimed.c.id,
            operation_id,
            bindparam("a_staged_kind", type_=String),
            bindparam("a_staged_state", type_=String),
            staged_detail,
            now,
        ).select_from(claimed),
        select(
            claimed.c.id,
            operation_id,
            bindparam("a_done_kind", type_=String),
            bindparam("a_done_state", type_=String),
            bindparam("a_done_detail", type_=_events.c.detail.type),
            now,
        ).select_from(claimed),
    )
    noted = insert(_events).from_select(list(_EVENT_COLUMNS), events).returning(_events.c.id).cte("noted")
    ids = func.array(select(noted.c.id).scalar_subquery())
    return (
        select(*claimed.c, ids)
        .add_cte(new_records.cte("new_records"))
        .add_cte(new_operation.cte("new_operation"))
    )


_ADD_AT_ONCE = _add_at_once(_CLAIM_BY_DIGEST)
_ADD_IF_ALLOWED = _add_at_once(_CLAIM_IF_ALLOWED)


@dataclass(frozen=True, slots=True)
class AddLimits:
    """The add's rules as bounds the statement checks (``add_if_allowed``): the import's state and
    expiry at ``valid_at`` (the service's clock), its record and byte quotas, the tenant's bytes."""

    valid_at: datetime
    open_state: str
    max_records: int
    max_bytes: int
    max_tenant_bytes: int


def add_if_allowed(
    connection: Connection,
    handle_digest: str,
    tenant: str,
    records: int,
    size: int,
    ahead: AddAhead,
    limits: AddLimits,
) -> tuple[str, int, list[int]] | None:
    """PostgreSQL: the add written in one statement on its own (``connection`` in autocommit), only
    where the import is the caller's, open, unexpired, within every quota and the key unused; the
    import's id, its record count after the add and the ids of its events, or None when it wrote nothing (the
    caller's checked path then finds out why, or replays a used key)."""
    params: dict[str, Any] = {
        "digest": handle_digest,
        "of_tenant": tenant,
        "records": records,
        "size": size,
        "now": utcnow(),
        "valid_at": limits.valid_at,
        "open_state": limits.open_state,
        "max_records": limits.max_records,
        "max_bytes": limits.max_bytes,
        "max_tenant_bytes": limits.max_tenant_bytes,
    }
    found = run_on_driver(connection, _ADD_IF_ALLOWED, params | _ahead_params(ahead, records))
    if not found:
        return None
    import_id, _tenant, record_count, event_ids = found[0]
    return import_id, record_count, list(event_ids)


@functools.cache
def _outcome_statement(events: int) -> Insert:
    """``WITH new_operation AS (INSERT INTO operations ...) INSERT INTO events ... RETURNING id``."""
    operation = {name: bindparam(f"op_{name}", type_=_operations.c[name].type) for name in _OPERATION_COLUMNS}
    new_operation = insert(_operations).values(operation).cte("new_operation")
    rows = [
        {name: bindparam(f"e{i}_{name}", type_=_events.c[name].type) for name in _EVENT_COLUMNS}
        for i in range(events)
    ]
    return insert(_events).values(rows).add_cte(new_operation).returning(_events.c.id)


@functools.cache
def _begin_alone(events: int) -> Select[Any]:
    """``WITH new_import AS (INSERT INTO imports SELECT ... WHERE <rules> RETURNING id), new_operation
    AS (INSERT INTO operations ... FROM new_import), noted AS (INSERT INTO events ... FROM new_import
    RETURNING id) SELECT ARRAY(SELECT id FROM noted) FROM new_import``: nothing is written where a
    rule does not hold (the principal's open imports at their quota, the key used), since
    ``new_import`` is empty then."""
    allowed = and_(_OPEN_IMPORTS.scalar_subquery() < bindparam("max_open", type_=Integer), _KEY_UNUSED)
    values = [bindparam(name, type_=_imports.c[name].type) for name in _NEW_IMPORT_COLUMNS]
    new_import = (
        insert(_imports)
        .from_select(list(_NEW_IMPORT_COLUMNS), select(*values).where(allowed))
        .returning(_imports.c.id)
        .cte("new_import")
    )

    def written(table: Table, prefix: str, columns: Sequence[str]) -> Select[Any]:
        values = [bindparam(f"{prefix}{name}", type_=table.c[name].type) for name in columns]
        return select(*values).select_from(new_import)

    new_operation = insert(_operations).from_select(
        list(_OPERATION_COLUMNS), written(_operations, "op_", _OPERATION_COLUMNS)
    )
    events_written = union_all(*(written(_events, f"e{i}_", _EVENT_COLUMNS) for i in range(events)))
    noted = insert(_events).from_select(list(_EVENT_COLUMNS), events_written).returning(_events.c.id)
    ids = func.array(select(noted.cte("noted").c.id).scalar_subquery())
    return select(ids).select_from(new_import).add_cte(new_operation.cte("new_operation"))


def begin_if_allowed(
    connection: Connection, new: NewImport, operation: FinishedOperation, max_open: int, valid_at: datetime
) -> list[int] | None:
    """PostgreSQL: the begin written in one statement on its own (``connection`` in autocommit): the
    import ``new`` with its finished ``operation`` and events, only where the principal has fewer
    than ``max_open`` open imports unexpired at ``valid_at`` and the operation's key is unused. The
    ids of its events, or None when it wrote nothing (the caller's checked path then refuses or
    replays)."""
    rules = {
        "of_tenant": new.tenant,
        "of_principal": new.principal,
        "open_state": new.state,
        "now": valid_at,
        "max_open": max_open,
        "a_principal": operation.principal,
        "a_kind": operation.kind,
        "a_key": operation.key,
    }
    statement = _begin_alone(len(operation.events))
    found = run_on_driver(connection, statement, new.row() | operation.params() | rules)
    return list(found[0][0]) if found else None
