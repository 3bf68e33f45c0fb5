"""Repositories: every query the services need, named in the domain's words.

No module above the store writes a query: services call these methods inside a unit of work, and
pass domain values (states, times, limits), never SQL.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    Table,
    Update,
    bindparam,
    delete,
    exists,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.orm import Session, aliased

from adapter.domain.errors import StoreConflict
from adapter.domain.states import ImportState, OperationKind, OperationState
from adapter.store.driver import event_values, run_on_driver
from adapter.store.notify import remember_events
from adapter.store.plan_terms import constant
from adapter.store.staged import join_records, split_records, staged_window
from adapter.store.tables import (
    OPERATION_BY_KEY,
    AuditRow,
    CompensationRow,
    ConfirmationRoundRow,
    EventRow,
    ImportRow,
    OperationRow,
    StagedChunkRow,
    new_event,
    utcnow,
)

__all__ = [
    "AuditRepository",
    "CommitFinish",
    "CompensationRepository",
    "ConfirmationRepository",
    "EventRepository",
    "ImportRepository",
    "OperationRepository",
    "RecordRepository",
    "RetentionRepository",
    "finish_if_held",
    "keyset_rows",
    "move_recovery_point_if_held",
]

Row = TypeVar("Row", ImportRow, OperationRow)

# The ORM reads of every import's path, built once with their parameters bound at execution: a
# statement built per call cost its construction and cache key, about 270 of the 870 us of CPU the
# finish's read of its operation and import took (in process, PostgreSQL; SQLAlchemy caches the
# compiled form either way, not the building of the statement).
_BY_DIGEST = select(ImportRow).where(ImportRow.handle_digest == bindparam("digest"))
_BY_DIGEST_LOCKED = _BY_DIGEST.with_for_update().execution_options(populate_existing=True)
_BY_KEY = select(OperationRow).where(OPERATION_BY_KEY)
_WITH_IMPORT = (
    select(OperationRow, ImportRow)
    .join(ImportRow, ImportRow.id == OperationRow.import_id)
    .where(OperationRow.id == bindparam("operation_id"))
)

# Two statements of every commit, built once (SQLAlchemy caches their compiled form) and run on the
# connection: no ORM query compilation or objects.
_BATCH_REFS = (
    select(OperationRow.id, OperationRow.batch_ref)
    .where(
        OperationRow.import_id == bindparam("import_id"),
        OperationRow.kind == bindparam("kind"),
        OperationRow.batch_ref.is_not(None),
    )
    .order_by(OperationRow.created_at, OperationRow.id)
)
_MOVE_POINT = (
    update(OperationRow)
    .where(OperationRow.id == bindparam("operation_id"))
    .values(
        recovery_point=bindparam("point"),
        attempts=OperationRow.attempts + bindparam("more"),
        version=OperationRow.version + 1,
        updated_at=bindparam("now"),
    )
    .returning(
        OperationRow.lease_owner,
        OperationRow.status,
        OperationRow.stop_requested,
        OperationRow.attempts,
        OperationRow.import_id,
    )
)


def _move_point_noted(move: Update) -> Select[Any]:
    """PostgreSQL: ``move`` (``_MOVE_POINT``, perhaps narrowed) and its event in one statement
    (data-modifying CTEs), the event's state and attempt taken from the row as the update left it."""
    moved = move.returning(OperationRow.id).cte("moved")
    events = cast(Table, EventRow.__table__)
    detail = func.json_build_object(
        literal_column("'point'"), bindparam("point"), literal_column("'attempt'"), moved.c.attempts
    )
    noted = (
        insert(events)
        .from_select(
            ["import_id", "operation_id", "kind", "state", "detail", "created_at"],
            select(
                moved.c.import_id, moved.c.id, bindparam("event_kind"), moved.c.status, detail
            ).add_columns(bindparam("now")),
        )
        .returning(events.c.id)
        .cte("noted")
    )
    return select(
        moved.c.lease_owner,
        moved.c.status,
        moved.c.stop_requested,
        moved.c.attempts,
        func.array(select(noted.c.id).scalar_subquery()),
    )


_MOVE_POINT_NOTED = _move_point_noted(_MOVE_POINT)
# The same, written only while the run still holds the operation: its lease owner's, in the status
# it runs in, with no stop asked (``move_recovery_point_if_held``).
_MOVE_HELD_POINT_NOTED = _move_point_noted(
    _MOVE_POINT.where(
        OperationRow.lease_owner == bindparam("owner"),
        OperationRow.status == bindparam("held_status"),
        OperationRow.stop_requested.is_(None),
    )
)


def move_recovery_point_if_held(
    connection: Connection,
    operation_id: str,
    owner: str,
    held_status: str,
    point: str,
    *,
    attempt: bool,
    event_kind: str,
) -> list[int] | None:
    """PostgreSQL: a recovery point (and an ``attempt`` counted) written in one statement on its
    own (``connection`` in autocommit), with its event, only where ``owner`` holds the operation's
    lease, the operation is ``held_status`` and no stop is asked. The ids of its events, or None
    when it wrote nothing (the caller's checked path then finds out why)."""
    params = {
        "operation_id": operation_id,
        "owner": owner,
        "held_status": held_status,
        "point": point,
        "more": int(attempt),
        "now": utcnow(),
        "event_kind": event_kind,
    }
    rows = run_on_driver(connection, _MOVE_HELD_POINT_NOTED, params)
    return list(rows[0][4]) if rows else None


@functools.cache
def _finish_run(events: int, *, held: bool = False) -> Select[Any]:
    """PostgreSQL: a commit's finish in one statement (data-modifying CTEs): the operation and the
    import, each only at the version it was read at, and ``events`` events, written only when both
    rows were; returns how many of each it changed and the new event ids.

    ``held``: the finish written on its own with nothing read first (:func:`finish_if_held`): the
    operation only while the run holds it (``owner``'s lease, ``held_status``, no stop asked), the
    import only while it is ``held_state`` with the ``i_count`` records the run claimed, and only
    where the operation was written. Outside a transaction nothing would undo the operation's update
    where the import's then found its row changed, so in that case the statement fails: a division
    by zero (PostgreSQL's SQL has no RAISE), and nothing of it stays.
    """
    operations = cast(Table, OperationRow.__table__)
    imports = cast(Table, ImportRow.__table__)
    event_table = cast(Table, EventRow.__table__)
    operation_is_ours = (
        (
            operations.c.lease_owner == bindparam("owner"),
            operations.c.status == bindparam("held_status"),
            operations.c.stop_requested.is_(None),
        )
        if held
        else (operations.c.version == bindparam("o_version"),)
    )
    finished = (
        update(operations)
        .where(operations.c.id == bindparam("o_id"), *operation_is_ours)
        .values(
            status=bindparam("o_status"),
            recovery_point=bindparam("o_point"),
            result=bindparam("o_result", type_=operations.c.result.type),
            error=bindparam("o_error", type_=operations.c.error.type),
            lease_owner=bindparam("o_lease_owner"),
            lease_expires_at=bindparam("o_lease_expires_at", type_=operations.c.lease_expires_at.type),
            version=operations.c.version + 1,
            updated_at=bindparam("now"),
        )
        .returning(operations.c.id)
        .cte("finished")
    )
    import_is_ours = (
        (
            imports.c.state == bindparam("held_state"),
            imports.c.record_count == bindparam("i_count"),
            exists(select(finished.c.id)),
        )
        if held
        else (imports.c.version == bindparam("i_version"),)
    )
    ended = (
        update(imports)
        .where(imports.c.id == bindparam("i_id"), *import_is_ours)
        .values(
            state=bindparam("i_state"),
            legacy_batch_id=func.coalesce(bindparam("i_legacy_batch_id"), imports.c.legacy_batch_id),
            version=imports.c.version + 1,
            updated_at=bindparam("now"),
        )
        .returning(imports.c.id)
        .cte("ended")
    )
    columns = ("import_id", "operation_id", "kind", "state", "detail")
    rows = [
        select(
            *[bindparam(f"e{i}_{name}", type_=event_table.c[name].type) for name in columns],
            bindparam("now", type_=event_table.c.created_at.type),
        ).select_from(finished, ended)
        for i in range(events)
    ]
    noted = (
        insert(event_table)
        .from_select([*columns, "created_at"], union_all(*rows))
        .returning(event_table.c.id)
        .cte("noted")
    )
    operations_written = select(func.count()).select_from(finished).scalar_subquery()
    imports_written = select(func.count()).select_from(ended).scalar_subquery()
    written = select(operations_written, imports_written, func.array(select(noted.c.id).scalar_subquery()))
    if held:  # 1 / 0 where the operation was written and the import was not (see above)
        written = written.add_columns(literal(1) // (literal(1) - operations_written + imports_written))
    return written


@dataclass(frozen=True, slots=True)
class CommitFinish:
    """A commit's finish as :func:`finish_if_held` writes it, nothing read first: the run's operation
    and lease owner, the import and the records the run claimed, how the run ended, and the finish's
    events (dicts of ``EventRow``'s columns, ``tables.new_event``)."""

    operation_id: str
    owner: str
    status: str
    recovery_point: str
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    import_id: str
    record_count: int
    import_state: str
    legacy_batch_id: str | None
    events: Sequence[Mapping[str, Any]]

    def params(self) -> dict[str, Any]:
        """The values of ``_finish_run(held=True)``: the lease let go, the run's rows as it holds them."""
        return {
            "o_id": self.operation_id,
            "owner": self.owner,
            "held_status": OperationState.IN_PROGRESS.value,
            "o_status": self.status,
            "o_point": self.recovery_point,
            "o_result": self.result,
            "o_error": self.error,
            "o_lease_owner": None,
            "o_lease_expires_at": None,
            "i_id": self.import_id,
            "held_state": ImportState.COMMITTING.value,
            "i_count": self.record_count,
            "i_state": self.import_state,
            "i_legacy_batch_id": self.legacy_batch_id,
            "now": utcnow(),
        } | event_values(self.events)


_DIVISION_BY_ZERO = "22012"  # PostgreSQL's SQLSTATE: the held finish's guard (``_finish_run``)


def finish_if_held(connection: Connection, finish: CommitFinish) -> list[int] | None:
    """PostgreSQL: a commit's finish written in one statement on its own (``connection`` in
    autocommit), only while its run still holds the operation and the import is as the run claimed
    it. The ids of its events, or None when it wrote nothing (the caller's checked transaction then
    reads the rows and decides)."""
    try:
        rows = run_on_driver(connection, _finish_run(len(finish.events), held=True), finish.params())
    except Exception as exc:
        if getattr(exc, "sqlstate", None) == _DIVISION_BY_ZERO:
            return None  # the operation was ours, the import had changed: the statement undid both
        raise
    [(operations, imports, event_ids, _)] = rows
    return list(event_ids) if operations == 1 and imports == 1 else None


@functools.cache
def _claim_run(events: int) -> Select[Any]:
    """PostgreSQL: a commit's claim in one statement (data-modifying CTEs): the import moved at the
    version it was read at, the new operation and ``events`` events inserted only if it was; returns
    how many imports it moved, the new event ids, and the ids and batch references of the import's
    commit operations as they were before (``_BATCH_REFS``, oldest first)."""
    operations = cast(Table, OperationRow.__table__)
    imports = cast(Table, ImportRow.__table__)
    event_table = cast(Table, EventRow.__table__)
    claimed = (
        update(imports)
        .where(imports.c.id == bindparam("i_id"), imports.c.version == bindparam("i_version"))
        .values(state=bindparam("i_state"), version=imports.c.version + 1, updated_at=bindparam("now"))
        .returning(imports.c.id)
        .cte("claimed")
    )
    names = [column.name for column in operations.c]
    created = (
        insert(operations)
        .from_select(
            names,
            select(*[bindparam(f"o_{name}", type_=operations.c[name].type) for name in names]).select_from(
                claimed
            ),
        )
        .returning(operations.c.id)
        .cte("created")
    )
    columns = ("import_id", "operation_id", "kind", "state", "detail")
    rows = [
        select(
            *[bindparam(f"e{i}_{name}", type_=event_table.c[name].type) for name in columns],
            bindparam("now", type_=event_table.c.created_at.type),
        ).select_from(claimed, created)
        for i in range(events)
    ]
    noted = (
        insert(event_table)
        .from_select([*columns, "created_at"], union_all(*rows))
        .returning(event_table.c.id)
        .cte("noted")
    )
    return select(
        select(func.count()).select_from(claimed).scalar_subquery(),
        func.array(select(noted.c.id).scalar_subquery()),
        func.array(_BATCH_REFS.with_only_columns(operations.c.id).scalar_subquery()),
        func.array(_BATCH_REFS.with_only_columns(operations.c.batch_ref).scalar_subquery()),
    )


def keyset_rows(
    session: Session,
    model: type[Row],
    equal: Mapping[str, object],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    as_of: datetime,
    before: tuple[datetime, str] | None,
    limit: int,
) -> list[Row]:
    """Rows newest first whose columns equal ``equal`` (``None`` values ignored), one keyset page.

    ``since``/``until`` bound ``created_at`` (``since`` inclusive). ``as_of`` freezes the list at
    its first page (no duplicates from inserts); ``before`` = (created_at, id) of the last row seen
    keeps deletes from causing gaps. Ask for one row more than a page to know whether another follows.
    """
    query = select(model).where(model.created_at <= as_of)
    for name, value in equal.items():
        if value is not None:
            query = query.where(getattr(model, name) == value)
    if since is not None:
        query = query.where(model.created_at >= since)
    if until is not None:
        query = query.where(model.created_at < until)
    if before is not None:
        query = query.where(tuple_(model.created_at, model.id) < tuple_(*before))
    query = query.order_by(model.created_at.desc(), model.id.desc()).limit(limit)
    return list(session.scalars(query))


class _Repository:
    """Works inside one unit of work: every query runs on its session."""

    def __init__(self, session: Session) -> None:
        self._session = session


class _RowRepository(_Repository, Generic[Row]):
    """Imports and operations are added, fetched by id and paged (newest first) the same way."""

    _model: type[Row]

    def add(self, row: Row) -> None:
        self._session.add(row)

    def get(self, row_id: str) -> Row | None:
        return self._session.get(self._model, row_id)

    def page(self, equal: Mapping[str, object], **window: Any) -> list[Row]:
        """One keyset page, newest first (see :func:`keyset_rows` for ``window``)."""
        return keyset_rows(self._session, self._model, equal, **window)


class ImportRepository(_RowRepository[ImportRow]):
    _model = ImportRow

    def past_expiry(self, state: str, now: datetime, limit: int) -> list[ImportRow]:
        """Imports still in ``state`` whose expiry has passed (the sweeper marks open ones expired)."""
        return list(
            self._session.scalars(
                select(ImportRow).where(ImportRow.state == state, ImportRow.expires_at <= now).limit(limit)
            )
        )

    def by_digest(self, handle_digest: str, *, lock: bool = False) -> ImportRow | None:
        """The import with this handle digest; ``lock`` holds its row until the transaction ends
        (``FOR UPDATE`` on PostgreSQL; SQLite already serialises writers), so concurrent changes to
        one import queue up instead of failing their version check."""
        statement = _BY_DIGEST_LOCKED if lock else _BY_DIGEST
        return self._session.scalars(statement, {"digest": handle_digest}).one_or_none()


class RecordRepository(_Repository):
    """An import's staged records, kept a chunk per add (``staged.py``), inside a unit of work."""

    def chunk(self, import_id: str, after_seq: int, limit: int) -> list[tuple[int, str]]:
        """The next ``limit`` records after ``after_seq`` with their positions, in order."""
        connection = self._session.connection()
        texts = staged_window(connection, import_id, after_seq, after_seq + limit).texts
        return [(after_seq + offset, text) for offset, text in enumerate(texts, start=1)]

    def sizes(self, import_id: str, seqs: Sequence[int]) -> dict[int, int]:
        """``seq -> size in bytes`` of the staged records at ``seqs`` (what a replacement frees)."""
        held = self._chunks_holding(import_id, seqs)
        return {seq: len(texts[seq - first].encode()) for seq in seqs for first, texts in _holding(held, seq)}

    def replace(self, import_id: str, texts: dict[int, str]) -> None:
        """Put ``texts[seq]`` in place of the staged record at each ``seq`` (all exist): each chunk
        that holds one is written once, whole."""
        held = self._chunks_holding(import_id, list(texts))
        for seq, text in texts.items():
            for first, records in _holding(held, seq):
                records[seq - first] = text
        for last_seq, (_, records) in held.items():
            self._session.execute(
                update(StagedChunkRow)
                .where(StagedChunkRow.import_id == import_id, StagedChunkRow.last_seq == last_seq)
                .values(data=join_records(records))
            )

    def count(self, import_id: str) -> int:
        held = func.sum(StagedChunkRow.last_seq - StagedChunkRow.first_seq + 1)
        return self._session.scalar(select(held).where(StagedChunkRow.import_id == import_id)) or 0

    def discard(self, import_id: str) -> None:
        self._session.execute(delete(StagedChunkRow).where(StagedChunkRow.import_id == import_id))

    def _chunks_holding(self, import_id: str, seqs: Sequence[int]) -> dict[int, tuple[int, list[str]]]:
        """``last_seq -> (first_seq, records)`` of the chunks that hold the records at ``seqs``: one
        indexed read per chunk (the first that ends at or after a position not yet covered)."""
        held: dict[int, tuple[int, list[str]]] = {}
        covered = 0
        for seq in sorted(set(seqs)):
            if seq <= covered:
                continue
            row = self._session.execute(
                select(StagedChunkRow.first_seq, StagedChunkRow.last_seq, StagedChunkRow.data)
                .where(StagedChunkRow.import_id == import_id, StagedChunkRow.last_seq >= seq)
                .order_by(StagedChunkRow.last_seq)
                .limit(1)
            ).first()
            if row is None:
                break
            covered = row.last_seq
            held[row.last_seq] = (row.first_seq, split_records(row.data))  # may start past ``seq``
        return held


def _holding(held: dict[int, tuple[int, list[str]]], seq: int) -> list[tuple[int, list[str]]]:
    """The chunk of ``held`` that holds position ``seq`` (none or one)."""
    return [(first, records) for last, (first, records) in held.items() if first <= seq <= last]


def _latest_by_key() -> Select[OperationRow]:
    """``OperationRepository.latest_by_key``'s statement, built once: building an aliased union of
    six selects cost more than running it (about 1.5 ms a call)."""
    under_key = union_all(
        *(
            select(OperationRow).where(
                OperationRow.tenant == bindparam("tenant"),
                OperationRow.principal == bindparam("principal"),
                OperationRow.kind == constant(kind.value),
                OperationRow.idempotency_key == bindparam("key"),
            )
            for kind in OperationKind
        )
    ).subquery("under_key")
    newest = aliased(OperationRow, under_key)
    return select(newest).order_by(newest.created_at.desc(), newest.id.desc()).limit(1)


_LATEST_BY_KEY = _latest_by_key()


class OperationRepository(_RowRepository[OperationRow]):
    _model = OperationRow

    def by_key(self, tenant: str, principal: str, kind: str, key: str) -> OperationRow | None:
        params = {"tenant": tenant, "principal": principal, "kind": kind, "key": key}
        return self._session.scalars(_BY_KEY, params).one_or_none()

    def latest_by_key(self, tenant: str, principal: str, key: str) -> OperationRow | None:
        """The newest operation of any kind under ``key`` (keys are unique per kind).

        One lookup per kind, each naming its kind in the statement's text (``plan_terms.py``), so
        the unique index (tenant, principal, kind, key) finds the few rows under the key whatever
        the plan. Without the kinds it read every operation of the principal (issue 25); with them
        as one ``kind IN (...)``, the plan PostgreSQL settled on for the prepared statement still
        did, filtering them by kind (1.9 ms against 0.05 ms at 100,000 imports)."""
        found = self._session.scalars(_LATEST_BY_KEY, {"tenant": tenant, "principal": principal, "key": key})
        return found.one_or_none()

    def for_import(self, import_id: str) -> list[OperationRow]:
        return list(
            self._session.scalars(
                select(OperationRow)
                .where(OperationRow.import_id == import_id)
                .order_by(OperationRow.created_at, OperationRow.id)
            )
        )

    def with_import(self, operation_id: str) -> tuple[OperationRow, ImportRow] | None:
        """The operation and its import in one read (a commit's finish needs both)."""
        found = self._session.execute(_WITH_IMPORT, {"operation_id": operation_id}).first()
        return None if found is None else (found[0], found[1])

    def commit_batch_refs(self, import_id: str, kind: str) -> list[tuple[str, str]]:
        """(operation id, batch reference) of the import's operations of ``kind`` that have one,
        oldest first, through ``ix_operations_import`` (every commit's claim asks)."""
        rows = self._session.connection().execute(_BATCH_REFS, {"import_id": import_id, "kind": kind})
        return [(operation_id, batch_ref) for operation_id, batch_ref in rows if batch_ref is not None]

    def move_recovery_point(
        self, operation_id: str, point: str, *, attempt: bool, event_kind: str
    ) -> tuple[str | None, str, str | None, int] | None:
        """Write ``point`` (and count an ``attempt``) with its event of ``event_kind`` (detail: the
        point and the attempt); returns the row's (lease owner, status, stop request, attempts) for
        the caller's checks, whose refusal rolls it all back; None when the operation is gone.

        One statement on PostgreSQL (run on the driver, ``driver.py``); on SQLite an
        ``UPDATE ... RETURNING`` and the event's insert."""
        params = {
            "operation_id": operation_id,
            "point": str(point),
            "more": int(attempt),
            "now": utcnow(),
            "event_kind": str(event_kind),
        }
        connection = self._session.connection()
        if connection.dialect.name == "postgresql":
            rows = run_on_driver(connection, _MOVE_POINT_NOTED, params)
            if not rows:
                return None
            lease_owner, status, stop_requested, attempts, event_ids = rows[0]
            remember_events(self._session, event_ids)
            return lease_owner, status, stop_requested, attempts
        found = connection.execute(_MOVE_POINT, params).first()
        if found is None:
            return None
        lease_owner, status, stop_requested, attempts, import_id = found
        detail = {"point": point, "attempt": attempts}
        self._session.add(EventRow(**new_event(event_kind, import_id, operation_id, status, detail)))
        return lease_owner, status, stop_requested, attempts

    def write_claimed(
        self, operation: OperationRow, row: ImportRow, events: Sequence[Mapping[str, Any]], *, new: bool
    ) -> list[tuple[str, str]]:
        """Write a commit's claim: its import ``row`` as the caller left it (at the version it was
        read at), its operation (``new``: to insert; otherwise loaded here and changed) and ``events``
        (dicts of ``EventRow``'s columns). Returns :meth:`commit_batch_refs` of the import as it was
        before, read in the same transaction.

        A new operation on PostgreSQL is one statement on the driver instead of the flush (a
        version-checked update and two inserts) and a read; the import leaves the session, and a lost
        race raises ``StoreConflict`` as the flush would (a duplicate key too, translated from the
        driver's error). Otherwise the flush writes the rows and the events go with the commit."""
        connection = self._session.connection()
        if not new or connection.dialect.name != "postgresql":
            if new:
                self._session.add(operation)
            self._session.flush()  # a concurrent claim of the import conflicts here
            self._session.add_all(EventRow(**event) for event in events)
            return self.commit_batch_refs(row.id, str(operation.kind))
        self._session.expunge(row)
        now = utcnow()
        operation.created_at = operation.updated_at = now
        operation.version = 1  # the version counter's first value, as the ORM would insert it
        params: dict[str, Any] = {"i_id": row.id, "i_version": row.version, "i_state": row.state, "now": now}
        for column in cast(Table, OperationRow.__table__).c:
            value = getattr(operation, column.key)
            params[f"o_{column.name}"] = str(value) if isinstance(value, str) else value  # StrEnums too
        params |= {"import_id": row.id, "kind": str(operation.kind)}  # _BATCH_REFS's own
        params |= event_values(events)
        [(moved, event_ids, ids, refs)] = run_on_driver(connection, _claim_run(len(events)), params)
        if moved != 1:
            raise StoreConflict()
        remember_events(self._session, event_ids)
        return list(zip(ids, refs, strict=True))

    def write_finished(
        self, operation: OperationRow, row: ImportRow, events: Sequence[Mapping[str, Any]]
    ) -> None:
        """Write a commit's finish: ``operation`` and its import ``row`` as the caller left them (at
        the versions they were read at) and ``events`` (dicts of ``EventRow``'s columns).

        On PostgreSQL one statement on the driver instead of the unit of work's flush (two version-
        checked updates and an insert); the two rows leave the session, and a lost race raises
        ``StoreConflict`` as the flush would. On SQLite the flush at the commit writes them."""
        connection = self._session.connection()
        if connection.dialect.name != "postgresql":
            self._session.add_all(EventRow(**event) for event in events)
            return
        self._session.expunge(operation)
        self._session.expunge(row)
        params: dict[str, Any] = {
            "o_id": operation.id,
            "o_version": operation.version,
            "o_status": operation.status,
            "o_point": None if operation.recovery_point is None else str(operation.recovery_point),
            "o_result": operation.result,
            "o_error": operation.error,
            "o_lease_owner": operation.lease_owner,
            "o_lease_expires_at": operation.lease_expires_at,
            "i_id": row.id,
            "i_version": row.version,
            "i_state": row.state,
            "i_legacy_batch_id": row.legacy_batch_id,
            "now": utcnow(),
        } | event_values(events)
        [(operations, imports, event_ids)] = run_on_driver(connection, _finish_run(len(events)), params)
        if operations != 1 or imports != 1:
            raise StoreConflict()
        remember_events(self._session, event_ids)

    def extend_lease(
        self, operation_id: str, owner: str, expires_at: datetime, records_sent: int | None = None
    ) -> tuple[bool, str | None]:
        """Compare-and-set: move the lease's expiry if ``owner`` still holds it, and record the run's
        progress; returns (renewed, the row's stop request)."""
        values: dict[str, Any] = {
            "lease_expires_at": expires_at,
            "version": OperationRow.version + 1,
            "updated_at": utcnow(),
        }
        if records_sent is not None:
            values["records_sent"] = records_sent
        found = self._session.execute(
            update(OperationRow)
            .where(OperationRow.id == operation_id, OperationRow.lease_owner == owner)
            .values(**values)
            .returning(OperationRow.stop_requested)
            .execution_options(synchronize_session=False)
        ).first()
        return (found is not None, found[0] if found is not None else None)

    def reconcile_candidates(
        self, kind: str, unknown: str, running: str, now: datetime, limit: int
    ) -> list[str]:
        """Ids of ``kind`` operations in ``unknown``, or ``running`` with no live lease; oldest first.

        The kind and the states are in the text (``plan_terms.py``): a plan for any states read
        every commit in ``updated_at`` order (277x at 100,000 imports, had PostgreSQL kept it)."""
        lease_over = or_(OperationRow.lease_expires_at.is_(None), OperationRow.lease_expires_at <= now)
        return list(
            self._session.scalars(
                select(OperationRow.id)
                .where(
                    OperationRow.kind == constant(kind),
                    or_(
                        OperationRow.status == constant(unknown),
                        (OperationRow.status == constant(running)) & lease_over,
                    ),
                )
                .order_by(OperationRow.updated_at)
                .limit(limit)
            )
        )

    def stalled_imports(self, kind: str, status: str, not_updated_since: datetime, limit: int) -> list[str]:
        """Import ids of ``kind`` operations left in ``status`` and untouched since the given time."""
        ids = self._session.scalars(
            select(OperationRow.import_id)
            .where(
                OperationRow.kind == kind,
                OperationRow.status == status,
                OperationRow.updated_at <= not_updated_since,
            )
            .limit(limit)
        )
        return [import_id for import_id in ids if import_id is not None]

    def count_by_status(self) -> dict[str, int]:
        rows = self._session.execute(select(OperationRow.status, func.count()).group_by(OperationRow.status))
        return {status: count for status, count in rows}

    def oldest_update(self, statuses: Collection[str]) -> datetime | None:
        """When the least recently updated operation in one of ``statuses`` was last updated."""
        return self._session.scalar(
            select(func.min(OperationRow.updated_at)).where(OperationRow.status.in_(statuses))
        )

    def abort_requested(self, import_id: str) -> bool:
        """Whether the owner asked to abort one of the import's commits while it ran."""
        found = self._session.scalar(
            select(OperationRow.id)
            .where(OperationRow.import_id == import_id, OperationRow.stop_requested == "abort")
            .limit(1)
        )
        return found is not None

    def abort_requested_imports(self, import_state: str, limit: int) -> list[str]:
        """Imports in ``import_state`` with a commit whose owner asked to abort it (a partial index
        holds only the operations with a stop request)."""
        return list(
            self._session.scalars(
                select(OperationRow.import_id)
                .join(ImportRow, ImportRow.id == OperationRow.import_id)
                .where(OperationRow.stop_requested == "abort", ImportRow.state == import_state)
                .distinct()
                .limit(limit)
            )
        )

    def latest_commit(self, import_id: str) -> OperationRow | None:
        return self._session.scalars(
            select(OperationRow)
            .where(OperationRow.import_id == import_id, OperationRow.kind == "commit")
            .order_by(OperationRow.created_at.desc(), OperationRow.id.desc())
            .limit(1)
        ).one_or_none()


class CompensationRepository(_Repository):
    def add(self, row: CompensationRow) -> None:
        self._session.add(row)

    def for_import(self, import_id: str) -> CompensationRow | None:
        return self._session.scalars(
            select(CompensationRow).where(CompensationRow.import_id == import_id)
        ).one_or_none()


def _new_or_missing(after_id: int, missing: Sequence[int]) -> ColumnElement[bool]:
    newer = EventRow.id > after_id
    return or_(newer, EventRow.id.in_(missing)) if missing else newer


class EventRepository(_Repository):
    def record(
        self,
        kind: str,
        *,
        import_id: str | None = None,
        operation_id: str | None = None,
        state: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        self._session.add(
            EventRow(import_id=import_id, operation_id=operation_id, kind=kind, state=state, detail=detail)
        )

    def record_many(self, events: Sequence[dict[str, Any]]) -> None:
        """Write ``events`` (each as :func:`tables.new_event` builds it) in one statement, without
        an ORM object each: the purge writes one per import it deletes, hundreds a batch."""
        if events:
            ids = self._session.scalars(insert(EventRow).returning(EventRow.id), list(events)).all()
            remember_events(self._session, ids)

    def for_operation(self, operation_id: str) -> list[EventRow]:
        return list(
            self._session.scalars(
                select(EventRow).where(EventRow.operation_id == operation_id).order_by(EventRow.id)
            )
        )

    def latest_id(self) -> int:
        return self._session.scalar(select(func.max(EventRow.id))) or 0

    def new_or_missing(self, after_id: int, missing: Sequence[int], limit: int) -> list[EventRow]:
        """Events above ``after_id`` or among ``missing``, oldest first.

        How the change feed follows the table without re-reading what it has seen: ``missing`` are the
        ids below ``after_id`` it has not seen yet (a transaction still running, or rolled back).
        """
        query = select(EventRow).where(_new_or_missing(after_id, missing))
        return list(self._session.scalars(query.order_by(EventRow.id).limit(limit)))

    def ids_new_or_missing(self, after_id: int, missing: Sequence[int], limit: int) -> list[int]:
        """The ids :meth:`new_or_missing` would return, without loading the events."""
        query = select(EventRow.id).where(_new_or_missing(after_id, missing))
        return list(self._session.scalars(query.order_by(EventRow.id).limit(limit)))

    def after(self, last_id: int, limit: int = 500) -> list[EventRow]:
        """Events newer than ``last_id``, oldest first: how subscribers follow changes."""
        return list(
            self._session.scalars(
                select(EventRow).where(EventRow.id > last_id).order_by(EventRow.id).limit(limit)
            )
        )


class AuditRepository(_Repository):
    def record(self, operation_id: str, actor: str, action: str, reason: str | None, outcome: str) -> None:
        """Append one operator action; texts are cut to the columns' sizes rather than refused."""
        self._session.add(
            AuditRow(
                operation_id=operation_id,
                actor=actor[:200],
                action=action,
                reason=(reason or None) and reason[:1000],
                outcome=outcome[:200],
            )
        )

    def for_operation(self, operation_id: str) -> list[AuditRow]:
        return list(
            self._session.scalars(
                select(AuditRow).where(AuditRow.operation_id == operation_id).order_by(AuditRow.id)
            )
        )


class RetentionRepository(_Repository):
    """Bounded deletes for the purge: each method deletes at most ``limit`` rows and says how many.

    Each query also bounds the index range it reads, so a batch costs about what it deletes, not
    what the store keeps: the rows a query skips (too young, or never purged, as committed imports)
    were read again by every batch, and at a million imports of history one batch of 100
    operations read 20 ms of them and the last, empty batch of events a whole table (1 s) while
    every other writer of a SQLite store waited (``bench/history.py``). The bounds follow from the
    cut-off (a row is created before it is updated), so they never purge a row the cut-off would
    keep; a row they leave out (an event written out of id order, an import given a longer time
    to live than today's longest, a clock that went back) waits for a later purge.
    """

    def purge_operations(self, finished: Collection[str], cutoff: datetime, limit: int) -> int:
        """Operations in a ``finished`` state, last updated before ``cutoff`` (so created before
        it: the status index's range ends there, not at the last finished operation)."""
        query = select(OperationRow.id).where(
            OperationRow.status.in_(finished),
            OperationRow.created_at < cutoff,
            OperationRow.updated_at < cutoff,
        )
        return self._delete_first(query, OperationRow.__table__, limit)

    def purge_staged_records(self, state: str, cutoff: datetime, limit: int) -> int:
        """Staged records of imports in ``state`` (committed: the legacy system has them now),
        ``limit`` chunks at most; how many records they held.

        The chunks are read first and their imports looked up by id: the store keeps what is
        staged (bounded by the quotas), while the imports in ``state`` grow with the history. A
        scalar subquery, not ``EXISTS``: PostgreSQL turns an ``EXISTS`` into a join, and with few
        chunks it hashed every import in ``state`` (a whole read of imports each batch)."""
        chunks = StagedChunkRow
        position = tuple_(chunks.import_id, chunks.last_seq)
        owner_updated = (
            select(ImportRow.updated_at)
            .where(ImportRow.id == chunks.import_id, ImportRow.state == state)
            .scalar_subquery()
        )
        chosen = select(chunks.import_id, chunks.last_seq).where(owner_updated < cutoff).limit(limit)
        deleted = self._session.execute(
            delete(chunks)
            .where(position.in_(chosen))
            .returning(chunks.import_id, chunks.last_seq - chunks.first_seq + 1)
        ).all()
        if deleted:
            # The tenant's byte quota counts what an import keeps: nothing, once all of it is gone.
            emptied = {import_id for import_id, _ in deleted}
            self._session.execute(
                update(ImportRow.__table__)  # type: ignore[arg-type]
                .where(ImportRow.id.in_(emptied), ~exists().where(chunks.import_id == ImportRow.id))
                .values(staged_bytes=0)
            )
        return sum(records for _, records in deleted)

    def purge_imports_by_id(self, ids: Collection[str]) -> int:
        """These imports, with their records and operations (ids from ``purgeable_import_owners``)."""
        query = select(ImportRow.id).where(ImportRow.id.in_(list(ids)))
        return self._delete(
            query, ImportRow.__table__, max(len(ids), 1), dependants=(StagedChunkRow, OperationRow)
        )

    def purgeable_import_owners(
        self,
        state: str,
        unfinished: Collection[str],
        cutoff: datetime,
        limit: int,
        *,
        expires_before: datetime,
    ) -> list[tuple[str, str, str]]:
        """``(import id, principal, tenant)`` of the next imports in ``state`` to purge
        (``purge_imports_by_id``): last updated before ``cutoff``, no operation ``unfinished``.

        They are read along the state index in order of expiry, up to ``expires_before``: the
        cut-off plus the longest time to live, since an import expires that long after it began at
        most, and began before it was last updated. One state at a time, since PostgreSQL reads a
        list of states in that index in no order (it chose to read every import instead)."""
        unfinished_operation = exists().where(
            OperationRow.import_id == ImportRow.id, OperationRow.status.in_(unfinished)
        )
        ids = (
            select(ImportRow.id)
            .where(
                ImportRow.state == state,
                ImportRow.expires_at < expires_before,
                ImportRow.updated_at < cutoff,
                ~unfinished_operation,
            )
            .order_by(ImportRow.expires_at)
            .limit(limit)
        )
        query = select(ImportRow.id, ImportRow.principal, ImportRow.tenant).where(ImportRow.id.in_(ids))
        return [(row.id, row.principal, row.tenant) for row in self._session.execute(query)]

    def purge_confirmation_rounds(self, cutoff: datetime, limit: int) -> int:
        """Confirmation rounds asked before ``cutoff`` (their sealed states expired long ago)."""
        rounds = ConfirmationRoundRow.round_id
        query = select(rounds).where(ConfirmationRoundRow.created_at < cutoff)
        return self._delete_first(query, ConfirmationRoundRow.__table__, limit, key="round_id")

    def event_span(self, cutoff: datetime) -> tuple[int, int]:
        """The ids between which (both excluded) events older than ``cutoff`` are looked for: below
        the first event, and the first younger one as far as a bisection of the ids finds (a few
        dozen lookups by id). Events are written in about the order of their ids, so
        :meth:`purge_events` stops there; without it the last batch read every younger event to
        find that none was left (events have no time index: one more index on the most written
        table, for the purge alone, was not worth it)."""
        # Two queries: SQLite reads the table whole for min() and max() asked together.
        first: int | None = self._session.scalar(select(func.min(EventRow.id)))
        last: int | None = self._session.scalar(select(func.max(EventRow.id)))
        if first is None or last is None:
            return 0, 0
        low, high = first, last + 1
        while low < high:
            middle = (low + high) // 2
            found = self._session.execute(
                select(EventRow.id, EventRow.created_at < cutoff)
                .where(EventRow.id >= middle)
                .order_by(EventRow.id)
                .limit(1)
            ).first()
            if found is None or not found[1]:
                high = middle
            else:
                low = int(found[0]) + 1
        return first - 1, low

    def purge_events(self, cutoff: datetime, after: int, below: int, limit: int) -> list[int]:
        """Events older than ``cutoff`` with ids between ``after`` and ``below`` (:meth:`event_span`),
        the first ``limit`` by id; the ids deleted. An older event above ``below`` (written out of
        order) waits for the next purge."""
        chosen = (
            select(EventRow.id)
            .where(EventRow.id > after, EventRow.id < below, EventRow.created_at < cutoff)
            .order_by(EventRow.id)
            .limit(limit)
        )
        deleted = self._session.execute(
            delete(EventRow).where(EventRow.id.in_(chosen)).returning(EventRow.id),
            execution_options={"synchronize_session": False},
        )
        return [int(event_id) for (event_id,) in deleted]

    def _delete_first(self, ids_query: Select[Any], table: Any, limit: int, key: str = "id") -> int:
        """Delete the first ``limit`` rows whose ids ``ids_query`` selects, in one statement.

        The ids never pass through Python: a purge runs in a serving process, and its CPU there is
        the GIL that the process's requests wait for (bench/history.py measures their p99).
        """
        result = self._session.execute(
            delete(table).where(table.c[key].in_(ids_query.limit(limit))),
            execution_options={"synchronize_session": False},
        )
        return int(cast(Any, result).rowcount)

    def _delete(
        self,
        ids_query: Select[Any],
        table: Any,
        limit: int,
        dependants: Sequence[type[StagedChunkRow] | type[OperationRow]] = (),
    ) -> int:
        ids = list(self._session.scalars(ids_query.limit(limit)))
        if ids:
            for dependant in dependants:
                self._session.execute(delete(dependant).where(dependant.import_id.in_(ids)))
            self._session.execute(delete(table).where(table.c.id.in_(ids)))
        return len(ids)


class ConfirmationRepository(_Repository):
    """The first answer of each commit confirmation round (``services/commit/confirmation.py``)."""

    def get(self, round_id: str) -> ConfirmationRoundRow | None:
        return self._session.get(ConfirmationRoundRow, round_id)

    def add(self, row: ConfirmationRoundRow) -> None:
        self._session.add(row)
