"""Cost as the work grows (issue 25): the hot calls against a year of finished history.

A kit that has run for a year holds many finished imports, operations and events until retention
purges them. This fills one database with ``--imports`` finished imports (default 1,000,000) spread
over a year and over 20 tenants of 5 principals each, with the operations and events the kit writes
for them (the shapes were read from real imports: begin, add, commit; some aborted, expired, failed
once, or reconciled), and measures the hot calls against it and against an empty database of the
same kind, in the same run, the two interleaved round by round:

``begin_import``, ``add_records`` (100 records), ``commit_import``, ``get_import_status``,
``get_operation_status`` by idempotency key, ``resources/list``'s first page (``list_imports``), the
admin operations list filtered by status, one reconciler pass and one late-commit watch pass.

The measured principal owns a tenth of the history, so the owner indexes are what is measured.
Then, on the full database, the purge of about ``--purge-rows`` rows (the oldest history, by a
retention cut-off) runs in a thread while another tenant polls ``get_import_status`` and adds
records: its p99 during the purge against its p99 just before (target: within 3x).

``--explain`` prints the plans of the hot statements that read a big table whole; on PostgreSQL
also the plan each settles on once prepared (psycopg prepares every statement by its fifth use on a
connection, and PostgreSQL may then keep one plan for any parameters).

Usage::

    .venv/bin/python bench/history.py --database both --imports 1000000
    .venv/bin/python bench/history.py --database sqlite --imports 20000 --rounds 30   # a quick run

Prints a table and one JSON line (the last line of stdout): ``ratios`` maps each step to its
full/empty ratio of medians (target: at most 1.2x).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import event

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_import import PRINCIPAL, build_kit, make_records
from harness import DEFAULT_POSTGRES_URL, fresh_database, simulator

from adapter.bootstrap import Kit
from adapter.domain.identity import Principal
from adapter.services.admin.reads import OperationFilter, list_operations
from adapter.services.late_commits import watch_recent_verdicts
from adapter.services.quotas import fold_held_bytes
from adapter.services.reconcile import reconcile_pass
from adapter.services.retention import purge_finished
from adapter.store import repositories, staging
from adapter.store.driver import compiled_for, driver_value
from adapter.store.reads import IMPORT_WITH_OPERATIONS
from adapter.store.staged import join_records

__all__ = ["STEPS", "History", "fill_history", "run_steps"]

STEPS = (
    "begin_import",
    "add_records",
    "commit_import",
    "get_import_status",
    "get_operation_status",
    "resources_list",
    "admin_operations",
    "reconcile_pass",
    "late_commit_watch",
)
YEAR = timedelta(days=365)
TENANTS = 20
PRINCIPALS_PER_TENANT = 5
OWNER_SHARE = 10  # one import in OWNER_SHARE belongs to the measured principal (PRINCIPAL)
RECORDS = 10  # records per history import, in one add
CHUNK = 5000  # history imports per bulk insert
OTHER = Principal(subject="other", tenant="other")  # the tenant the purge must not stall
ADMIN_FILTER = OperationFilter(tenant=PRINCIPAL.tenant, status="succeeded")
"""What an operator looking at one tenant asks; its newest 50 are the measured rounds' own on both
databases (the warm-up makes at least a page of them), so a ratio is history's cost, not a fuller page."""

# --- the history ---------------------------------------------------------------------------------

_IMPORT_COLUMNS = (
    *("id", "handle_digest", "principal", "tenant", "target", "state", "record_count", "staged_bytes"),
    *("revision", "legacy_batch_id", "expires_at", "created_at", "updated_at", "version"),
)
_OPERATION_COLUMNS = (
    *("id", "kind", "principal", "tenant", "import_id", "idempotency_key", "request_fingerprint"),
    *("status", "batch_ref", "recovery_point", "result", "error", "attempts", "lease_owner"),
    *("lease_expires_at", "records_sent", "stop_requested", "created_at", "updated_at", "version"),
)
_EVENT_COLUMNS = ("import_id", "operation_id", "kind", "state", "detail", "created_at")
_STAGED_COLUMNS = ("import_id", "last_seq", "first_seq", "data")
TABLES = {
    "imports": _IMPORT_COLUMNS,
    "operations": _OPERATION_COLUMNS,
    "events": _EVENT_COLUMNS,
    "staged_chunks": _STAGED_COLUMNS,
}
_RECORD = json.dumps(make_records(1)[0], separators=(",", ":"))
_CHUNK = join_records([_RECORD] * RECORDS)  # the records of the one add of each import
_FINGERPRINT = "f" * 64


def _at(moment: datetime) -> str:
    """A time as the store keeps it: naive UTC text with microseconds (what SQLAlchemy writes)."""
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


@dataclass(slots=True)
class Rows:
    """One chunk of history, table by table, as tuples in :data:`TABLES`' column order."""

    imports: list[tuple[Any, ...]] = field(default_factory=list)
    operations: list[tuple[Any, ...]] = field(default_factory=list)
    events: list[tuple[Any, ...]] = field(default_factory=list)
    staged_chunks: list[tuple[Any, ...]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class History:
    """``imports`` finished imports, the i-th created at ``start + i * year / imports``.

    Fates, by ``i % 100``: 0-89 committed; 90-94 aborted; 95-97 expired (never committed); 98 a
    commit that failed (``legacy_rejected``) before the import was aborted; 99 a commit whose outcome
    was unknown and that the reconciler judged committed (``operation.reconciled`` events). Committed
    imports younger than the retention keep their staged records, as the kit leaves them.
    """

    imports: int
    now: datetime
    keep_staged: timedelta = timedelta(days=7)

    @property
    def start(self) -> datetime:
        return self.now - YEAR

    def created(self, i: int) -> datetime:
        return self.start + (YEAR - timedelta(hours=1)) * (i / max(self.imports, 1))

    def chunks(self, size: int = CHUNK) -> Iterator[Rows]:
        for first in range(0, self.imports, size):
            rows = Rows()
            for i in range(first, min(first + size, self.imports)):
                self._one(i, rows)
            yield rows

    def _one(self, i: int, rows: Rows) -> None:
        fate = i % 100
        if i % OWNER_SHARE == 0:
            tenant, principal = PRINCIPAL.tenant, PRINCIPAL.subject
        else:
            owner = i % (TENANTS * PRINCIPALS_PER_TENANT)
            tenant, principal = f"tenant-{owner % TENANTS}", f"user-{owner}"
        import_id = f"{i:032x}"
        t0 = self.created(i)
        at = [_at(t0 + timedelta(milliseconds=ms)) for ms in (0, 5, 20, 25, 900, 1000)]
        committed = fate < 90 or fate == 99
        state = "committed" if committed else ("expired" if 95 <= fate <= 97 else "aborted")
        legacy_batch = f"H{i:010d}" if committed else None
        ended = _at(t0 + timedelta(minutes=15)) if state == "expired" else at[5]
        # The purge deletes a committed import's records after the retention and zeroes its bytes.
        keeps = committed and self.now - t0 < self.keep_staged
        staged_bytes = 1100 if keeps or not committed else 0
        expires = _at(t0 + timedelta(minutes=15))
        rows.imports.append(
            (
                import_id,
                f"{i:064x}",
                principal,
                tenant,
                "customers",
                state,
                RECORDS,
                staged_bytes,
                0,
                *(legacy_batch, expires, at[0], ended, 5 if committed else 3),
            )
        )
        ops = [f"{(1 << 124) | (i << 2) | k:032x}" for k in range(3)]
        owner = (principal, tenant, import_id)
        begin_result = json.dumps({"import_id": import_id, "target": "customers", "expires_at": at[0]})
        add_result = json.dumps({"accepted": RECORDS, "record_count": RECORDS, "first_seq": 1})
        rows.operations.append(
            (
                ops[0],
                "begin",
                *owner,
                f"b-{i}",
                _FINGERPRINT,
                "succeeded",
                None,
                None,
                begin_result,
                None,
                *(1, None, None, None, None, at[0], at[0], 1),
            )
        )
        rows.operations.append(
            (
                ops[1],
                "add",
                *owner,
                None,
                _FINGERPRINT,
                "succeeded",
                None,
                None,
                add_result,
                None,
                *(1, None, None, None, None, at[1], at[1], 1),
            )
        )
        events = rows.events
        events += [
            (import_id, ops[0], "import.opened", "open", '{"ttl_seconds": 900}', at[0]),
            (import_id, ops[0], "operation.succeeded", "succeeded", '{"kind": "begin"}', at[0]),
            (
                import_id,
                ops[1],
                "import.records_staged",
                "open",
                '{"accepted": 10, "record_count": 10}',
                at[1],
            ),
            (import_id, ops[1], "operation.succeeded", "succeeded", '{"kind": "add"}', at[1]),
        ]
        if committed or fate == 98:
            self._commit(i, fate, import_id, ops[2], owner, at, legacy_batch, rows)
        if state == "aborted":
            events.append((import_id, None, "import.aborted", "aborted", None, ended))
        elif state == "expired":
            events.append((import_id, None, "import.expired", "expired", None, ended))
        if keeps:
            rows.staged_chunks.append((import_id, RECORDS, 1, _CHUNK))

    @staticmethod
    def _commit(
        i: int,
        fate: int,
        import_id: str,
        op: str,
        owner: tuple[str, str, str],
        at: list[str],
        legacy_batch: str | None,
        rows: Rows,
    ) -> None:
        """The commit operation and its events: succeeded, failed before COMMIT, or reconciled."""
        failed = fate == 98
        status = "failed" if failed else "succeeded"
        result = None if failed else json.dumps({"legacy_batch_id": legacy_batch, "record_count": RECORDS})
        error = json.dumps({"code": "legacy_rejected", "message": "refused"}) if failed else None
        point = "failed_before_commit" if failed else "committed"
        rows.operations.append(
            (
                op,
                "commit",
                *owner,
                f"c-{i}",
                _FINGERPRINT,
                status,
                f"adp-{op}",
                point,
                result,
                error,
                *(1, None, None, None, None, at[2], at[4], 4),
            )
        )
        rows.events.extend(
            [
                (import_id, op, "import.committing", "committing", '{"record_count": 10}', at[2]),
                (import_id, op, "operation.in_progress", "in_progress", '{"kind": "commit"}', at[2]),
                (import_id, op, "operation.recovery_point", "in_progress", '{"point": "replaying"}', at[3]),
            ]
        )
        if failed:
            rows.events += [
                (import_id, op, "operation.failed", "failed", '{"code": "legacy_rejected"}', at[4]),
                (import_id, op, "import.open", "open", None, at[4]),
            ]
            return
        rows.events.append(
            (import_id, op, "operation.recovery_point", "in_progress", '{"point": "commit_sent"}', at[3])
        )
        if fate == 99:
            rows.events += [
                (import_id, op, "operation.outcome_unknown", "outcome_unknown", None, at[3]),
                (import_id, op, "operation.reconciled", "succeeded", '{"finding": "committed"}', at[4]),
            ]
        rows.events += [
            (import_id, op, "operation.succeeded", "succeeded", '{"kind": "commit"}', at[4]),
            (import_id, op, "import.committed", "committed", '{"record_count": 10}', at[4]),
        ]


def fill_history(kit: Kit, history: History) -> dict[str, int]:
    """Bulk-insert ``history`` (COPY on PostgreSQL, ``executemany`` on SQLite); rows per table."""
    engine = kit.service.ctx.store.engine
    counts = dict.fromkeys(TABLES, 0)
    connection = engine.raw_connection()
    try:
        driver: Any = connection.driver_connection
        write = _copy_writer(driver) if engine.dialect.name == "postgresql" else _insert_writer(driver)
        for rows in history.chunks():
            for table in TABLES:
                chunk = getattr(rows, table)
                write(table, chunk)
                counts[table] += len(chunk)
            driver.commit()
        # What a tenant holds: the trigger on imports logged each holding import as a change, and a
        # running kit folds them into the totals within a maintenance pass.
        fold_held_bytes(kit.service.ctx)
        if engine.dialect.name == "postgresql":
            driver.commit()
            driver.autocommit = True
            driver.execute("VACUUM ANALYZE")  # what autovacuum does to a table that grew for a year
            driver.autocommit = False
    finally:
        connection.close()
    return counts


def _copy_writer(driver: Any) -> Callable[[str, list[tuple[Any, ...]]], None]:
    def write(table: str, chunk: list[tuple[Any, ...]]) -> None:
        with (
            driver.cursor() as cursor,
            cursor.copy(f"COPY {table} ({', '.join(TABLES[table])}) FROM STDIN") as copy,
        ):
            for row in chunk:
                copy.write_row(row)

    return write


def _insert_writer(driver: Any) -> Callable[[str, list[tuple[Any, ...]]], None]:
    def write(table: str, chunk: list[tuple[Any, ...]]) -> None:
        columns = TABLES[table]
        marks = ", ".join("?" for _ in columns)
        driver.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", chunk)

    return write


# --- the measured steps --------------------------------------------------------------------------


def _timed(spent: dict[str, list[float]], step: str, call: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = call()
    spent[step].append(time.perf_counter() - started)
    return result


def run_steps(kit: Kit, spent: dict[str, list[float]], n: int, *, tag: str = "") -> None:
    """One round of every step in :data:`STEPS` on ``kit``; wall seconds appended to ``spent``."""
    service = kit.service
    ctx = service.ctx
    records = make_records(100, 100 * n)
    key = f"bench-{tag}{n}"
    handle = _timed(spent, "begin_import", lambda: service.begin(PRINCIPAL, "customers", idempotency_key=key))
    handle = handle.handle
    _timed(spent, "add_records", lambda: service.add(PRINCIPAL, handle, records))
    result = _timed(spent, "commit_import", lambda: service.commit(PRINCIPAL, handle, idempotency_key=key))
    if result.status != "committed":
        raise SystemExit(f"commit answered {result.status}")
    _timed(spent, "get_import_status", lambda: service.status(PRINCIPAL, handle))
    _timed(spent, "get_operation_status", lambda: service.operation_status(PRINCIPAL, idempotency_key=key))
    page = kit.settings.page_size
    _timed(spent, "resources_list", lambda: service.list_imports(PRINCIPAL, cursor=None, limit=page))
    _timed(spent, "admin_operations", lambda: list_operations(ctx, ADMIN_FILTER, limit=50))
    _timed(spent, "reconcile_pass", lambda: reconcile_pass(ctx))
    _timed(spent, "late_commit_watch", lambda: watch_recent_verdicts(ctx))


def medians_ms(spent: dict[str, list[float]]) -> dict[str, float]:
    return {step: round(1000 * statistics.median(values), 3) for step, values in spent.items() if values}


# --- the plans of the hot queries (PostgreSQL) ---------------------------------------------------

BIG_TABLES = ("imports", "operations", "events", "staged_chunks")
"""The tables that grow with the work: a sequential scan of one costs in proportion to history."""


@contextlib.contextmanager
def captured_sql(kit: Kit) -> Iterator[list[tuple[str, Any]]]:
    """Every statement the kit runs through SQLAlchemy meanwhile, with its parameters; plus the
    status read, which runs on the driver's own cursor (``store/reads.py``) and is added as compiled."""
    engine = kit.service.ctx.store.engine
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if not many:
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def status_read_sql(kit: Kit, handle: str) -> tuple[str, Any]:
    """The ``get_import_status`` read as it runs, with the digest of ``handle``."""
    engine = kit.service.ctx.store.engine
    digest = kit.service.ctx.codec.digest(handle)
    return compiled_for(IMPORT_WITH_OPERATIONS, engine.dialect)[0], {"digest": digest}


def driver_statements(kit: Kit, handle: str) -> list[tuple[str, Any]]:
    """The statements of ``begin_import``, ``add_records`` and the commit's recovery point and finish
    that the store runs on the driver's cursor (out of SQLAlchemy's sight), with the values the
    measured principal gives them: the checked paths' (the import held for an add, the open imports
    counted for a begin, an operation by its key, the finish at the versions read) and those written
    on their own (``*_if_allowed``, ``move_recovery_point_if_held``, ``finish_if_held``)."""
    engine = kit.service.ctx.store.engine
    digest = kit.service.ctx.codec.digest(handle)
    now = datetime.now(UTC)
    owner = {"of_tenant": PRINCIPAL.tenant, "of_principal": PRINCIPAL.subject}
    key = {"tenant": PRINCIPAL.tenant, "principal": PRINCIPAL.subject, "kind": "begin", "key": "k"}
    new = staging.NewImport(
        "explain", "explain", PRINCIPAL.subject, PRINCIPAL.tenant, "customers", "open", now
    )
    event = {"kind": "import.opened", "import_id": "explain", "operation_id": "explain", "state": "open"}
    begun = staging.FinishedOperation(
        "explain",
        "begin",
        PRINCIPAL.subject,
        PRINCIPAL.tenant,
        "explain",
        "k",
        "f",
        "succeeded",
        {},
        [event | {"detail": {}}] * 2,
    )
    alone = {"a_principal": PRINCIPAL.subject, "a_kind": "begin", "a_key": "k", "max_open": 100}
    ahead = staging.AddAhead(
        "explain",
        "add",
        PRINCIPAL.subject,
        "k",
        "f",
        "succeeded",
        ("import.records_staged", "open"),
        ("operation.succeeded", "succeeded", {}),
        ["{}"],
    )
    add = owner | {
        "digest": digest,
        "records": 1,
        "size": 2,
        "now": now,
        "valid_at": now,
        "open_state": "open",
    }
    add |= {"max_records": 10**6, "max_bytes": 10**9, "max_tenant_bytes": 10**12}
    point = {
        "operation_id": "explain",
        "owner": "explain",
        "held_status": "in_progress",
        "point": "commit_sent",
    }
    point |= {"more": 0, "now": now, "event_kind": "operation.recovery_point"}
    finished = repositories.CommitFinish(
        "explain",
        "explain",
        "succeeded",
        "committed",
        {},
        None,
        "explain",
        1,
        "committed",
        "B",
        [event | {"detail": {}}] * 2,
    )
    found = [
        (staging._CLAIM_BY_DIGEST, owner | {"digest": digest, "records": 0, "size": 0, "now": now}),
        (staging._OPEN_IMPORTS, owner | {"open_state": "open", "now": now}),
        (staging._BY_KEY, key),
        (
            staging._begin_alone(2),
            new.row() | begun.params() | owner | alone | {"open_state": "open", "now": now},
        ),
        (staging._ADD_IF_ALLOWED, add | staging._ahead_params(ahead, 1)),
        (repositories._MOVE_HELD_POINT_NOTED, point),
        (repositories._finish_run(2, held=True), finished.params()),
        (repositories._finish_run(2), finished.params() | {"o_version": 1, "i_version": 1}),
    ]
    statements = []
    for statement, values in found:
        sql, constants = compiled_for(statement, engine.dialect)
        statements.append((sql, constants | {name: driver_value(value) for name, value in values.items()}))
    return statements


_EXPLAINED = itertools.count()  # each capture's round has keys of its own


def hot_statements(kit: Kit) -> list[tuple[str, Any]]:
    """The distinct SELECT, UPDATE and DELETE statements of one round of :data:`STEPS`, each with
    the parameters it first ran with."""
    with captured_sql(kit) as seen:
        run_steps(kit, {step: [] for step in STEPS}, next(_EXPLAINED), tag="explain-")
    if _dialect(kit) == "postgresql":  # on SQLite these run through SQLAlchemy: captured above
        handle = kit.service.list_imports(PRINCIPAL, cursor=None, limit=1).items[0].handle
        seen.append(status_read_sql(kit, handle))
        seen += driver_statements(kit, handle)
    distinct: dict[str, Any] = {}
    for statement, parameters in seen:
        if statement.lstrip().split(None, 1)[0].upper() in ("SELECT", "UPDATE", "DELETE", "WITH"):
            distinct.setdefault(statement, parameters)
    return list(distinct.items())


def _dialect(kit: Kit) -> str:
    return kit.service.ctx.store.engine.dialect.name


def explain(kit: Kit, statement: str, parameters: Any, *, prepared: bool = False) -> list[str]:
    """The database's plan of ``statement`` with ``parameters``: PostgreSQL's ``EXPLAIN`` lines, or
    SQLite's ``EXPLAIN QUERY PLAN`` details (in a transaction rolled back: a plan changes nothing,
    but on PostgreSQL the statement may take row locks if run). ``prepared`` (PostgreSQL): the plan
    the statement runs with once prepared and run a few times (``_prepared_plan``)."""
    sqlite = _dialect(kit) == "sqlite"
    connection = kit.service.ctx.store.engine.raw_connection()
    try:
        driver: Any = connection.driver_connection
        if prepared:
            plan = _prepared_plan(driver, statement, parameters)
        else:
            cursor = driver.cursor()
            cursor.execute(("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + statement, parameters)
            plan = [str(row[3] if sqlite else row[0]) for row in cursor.fetchall()]
        driver.rollback()
        return plan
    finally:
        connection.close()


CUSTOM_PLANS = 5
"""Runs of a prepared statement that PostgreSQL plans for their values before it weighs one plan for
any values (a generic plan), which it keeps if its estimated cost is about theirs (plancache.c)."""


def _prepared_plan(driver: Any, statement: str, parameters: dict[str, Any]) -> list[str]:
    """The plan PostgreSQL settles on for ``statement`` (psycopg's ``%(name)s`` parameters) prepared
    and run with ``parameters`` more than :data:`CUSTOM_PLANS` times: the plan of every later run.

    psycopg prepares a statement at its fifth use on a connection (the driver's at the first). A
    generic plan knows no parameter's value, so a constant the query is written for must be in its
    text (``store/plan_terms.py``): bound as a parameter, the kinds of ``get_operation_status``'s
    read by key left the index's kind column out of the scan's key."""
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement)))
    numbered = re.sub(r"%\((\w+)\)s", lambda found: f"${names.index(found.group(1)) + 1}", statement)
    cursor = psycopg.ClientCursor(driver)  # EXECUTE takes its arguments as literals
    cursor.execute(f"PREPARE settling AS {numbered}")
    try:
        marks = ", ".join("%s" for _ in names)
        for _ in range(CUSTOM_PLANS + 1):
            cursor.execute(f"EXPLAIN EXECUTE settling({marks})", [parameters[name] for name in names])
            plan = [str(row[0]) for row in cursor.fetchall()]
        return plan
    finally:
        cursor.execute("DEALLOCATE settling")


def seq_scans(plan: Sequence[str]) -> list[str]:
    """The plan's lines that read a big table whole: PostgreSQL's ``Seq Scan on t``, SQLite's
    ``SCAN t`` through no index."""

    def whole(line: str) -> bool:
        text = line.strip() + " "
        return any(
            f"Seq Scan on {t} " in text or (text.startswith(f"SCAN {t} ") and "INDEX" not in text)
            for t in BIG_TABLES
        )

    return [line.strip() for line in plan if whole(line)]


def print_plans(kit: Kit, *, verbose: bool = False) -> int:
    """Print every hot statement whose plan reads a big table whole, as run and, on PostgreSQL, as
    settled on once prepared (``verbose``: every hot statement's plans); how many plans read one
    whole."""
    bad = 0
    for statement, parameters in hot_statements(kit):
        plans = {"plan": explain(kit, statement, parameters)}
        if _dialect(kit) == "postgresql":
            plans["prepared plan"] = explain(kit, statement, parameters, prepared=True)
        for name, plan in plans.items():
            scans = seq_scans(plan)
            bad += bool(scans)
            if scans or verbose:
                shown = "\n    ".join(plan)
                print(" ".join(statement.split())[:300], f"\n  {name}:\n    {shown}", flush=True)
    return bad


# --- the purge against another tenant's calls ----------------------------------------------------


def p99(times: Sequence[float]) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


PROBE_ADDS_PER_IMPORT = 50
"""Adds the other tenant makes to one import before it opens the next: its calls then cost the same
before and during the purge (a status read returns every operation of its import, so an import that
kept growing made the later calls, those during the purge, dearer by themselves)."""


def _probe(kit: Kit, watched: str, until: Callable[[], bool], minimum: int) -> list[float]:
    """The other tenant's calls, alternately ``get_import_status`` of ``watched`` (one import of a
    fixed size) and a 10-record add to an import of at most :data:`PROBE_ADDS_PER_IMPORT` adds (the
    full one aborted and the next opened, untimed), until ``until()`` holds and at least
    ``minimum`` were made; each call's wall seconds."""
    service = kit.service
    times: list[float] = []
    n = 0
    handle = ""
    while len(times) < minimum or not until():
        if n % (2 * PROBE_ADDS_PER_IMPORT) == 1:
            if handle:  # done with: its open import would count against the tenant's quota
                service.abort(OTHER, handle)
            handle = service.begin(OTHER, "customers").handle
        started = time.perf_counter()
        if n % 2:
            service.add(OTHER, handle, make_records(10, 10 * n))
        else:
            service.status(OTHER, watched)
        times.append(time.perf_counter() - started)
        n += 1
    return times


def purge_stall(kit: Kit, history: History, purge_rows: int, probe_calls: int) -> dict[str, Any]:
    """p99 of the other tenant's calls before and during a purge of about ``purge_rows`` rows."""
    per_import = 16  # operations and events of one history import, about
    fraction = min(1.0, purge_rows / per_import / max(history.imports, 1))
    cutoff = history.start + (YEAR - timedelta(days=8)) * fraction
    retention = history.now - cutoff
    watched = kit.service.begin(OTHER, "customers").handle
    for n in range(5):
        kit.service.add(OTHER, watched, make_records(10, 10 * n))
    before = _probe(kit, watched, lambda: True, probe_calls)
    report: dict[str, Any] = {}

    def purge() -> None:
        started = time.perf_counter()
        report["purged"] = purge_finished(
            kit.service.ctx, retention=retention, batch=kit.settings.purge_batch_size
        )
        report["seconds"] = time.perf_counter() - started

    thread = threading.Thread(target=purge, name="purge")
    thread.start()
    during = _probe(kit, watched, lambda: not thread.is_alive(), 20)
    thread.join()
    purged = report["purged"]
    deleted = purged.operations + purged.imports + purged.staged_records + purged.events
    return {
        "rows_deleted": deleted,
        "by_table": {
            "operations": purged.operations,
            "imports": purged.imports,
            "staged_records": purged.staged_records,
            "events": purged.events,
        },
        "purge_seconds": round(report["seconds"], 2),
        "calls_before": len(before),
        "calls_during": len(during),
        "p99_before_ms": round(1000 * p99(before), 2),
        "p99_during_ms": round(1000 * p99(during), 2),
        "p99_ratio": round(p99(during) / p99(before), 2),
    }


# --- the run -------------------------------------------------------------------------------------


def measure(kind: str, args: argparse.Namespace, workdir: Path, address: tuple[str, int]) -> dict[str, Any]:
    """Empty and full databases of ``kind``, the steps interleaved; the purge on the full one."""
    with (
        fresh_database(kind, workdir, args.postgres_url) as empty_url,
        fresh_database(kind, workdir, args.postgres_url) as full_url,
    ):
        empty, full = build_kit(empty_url, address, 100), build_kit(full_url, address, 100)
        try:
            history = History(args.imports, datetime.now(UTC))
            started = time.perf_counter()
            counts = fill_history(full, history)
            fill_seconds = time.perf_counter() - started
            print(f"{kind}: filled {counts} in {fill_seconds:.1f} s", flush=True)
            spent = {name: {step: [] for step in STEPS} for name in ("empty", "full")}
            warmup = args.warmup
            for n in range(args.rounds + warmup):
                order = (("empty", empty), ("full", full)) if n % 2 else (("full", full), ("empty", empty))
                for name, kit in order:
                    scratch: dict[str, list[float]] = {step: [] for step in STEPS}
                    run_steps(kit, scratch, n, tag=name)
                    if n >= warmup:
                        for step, values in scratch.items():
                            spent[name][step] += values
            empty_ms, full_ms = medians_ms(spent["empty"]), medians_ms(spent["full"])
            ratios = {step: round(full_ms[step] / empty_ms[step], 2) for step in STEPS}
            if args.explain:
                scanning = print_plans(full, verbose=args.verbose)
                print(f"plans of hot statements with a sequential scan of a big table: {scanning}")
            purge = purge_stall(full, history, args.purge_rows, args.probe_calls) if args.purge_rows else None
        finally:
            empty.close()
            full.close()
    return {
        "database": kind,
        "imports": args.imports,
        "rows": counts,
        "fill_seconds": round(fill_seconds, 1),
        "rounds": args.rounds,
        "empty_ms": empty_ms,
        "full_ms": full_ms,
        "ratios": ratios,
        "purge": purge,
    }


def _print_table(result: dict[str, Any]) -> None:
    rounds, imports = result["rounds"], result["imports"]
    print(f"{result['database']}: median ms of {rounds} rounds, {imports:,} imports of history")
    print(f"  {'step':<22}{'empty':>10}{'full':>10}{'ratio':>8}")
    for step in STEPS:
        empty, full = result["empty_ms"][step], result["full_ms"][step]
        print(f"  {step:<22}{empty:>10.3f}{full:>10.3f}{result['ratios'][step]:>7.2f}x")
    purge = result["purge"]
    if purge:
        print(
            f"  purge of {purge['rows_deleted']:,} rows in {purge['purge_seconds']} s: other tenant's p99 "
            f"{purge['p99_before_ms']} ms before, {purge['p99_during_ms']} ms during ({purge['p99_ratio']}x)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", type=int, default=1_000_000, help="finished imports of history")
    parser.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=100, help="measured rounds per database")
    parser.add_argument(
        "--warmup",
        type=int,
        default=50,
        help="rounds first: at least a page (50), so both first pages are full",
    )
    parser.add_argument("--purge-rows", type=int, default=1_000_000, help="0: no purge measurement")
    parser.add_argument(
        "--probe-calls", type=int, default=2000, help="the other tenant's calls before the purge"
    )
    parser.add_argument("--explain", action="store_true", help="print the plans that scan")
    parser.add_argument("--verbose", action="store_true", help="with --explain: print every plan")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    args = parser.parse_args(argv)
    kinds = ("sqlite", "postgres") if args.database == "both" else (args.database,)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp, simulator(Path(tmp)) as address:
        for kind in kinds:
            result = measure(kind, args, Path(tmp), address)
            _print_table(result)
            results.append(result)
    summary: dict[str, Any] = results[0] if len(results) == 1 else {"databases": results}
    summary["bench"] = "history"
    if len(results) > 1:
        summary["ratios"] = {r["database"]: r["ratios"] for r in results}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
