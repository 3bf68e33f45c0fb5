"""Semantics of the simulated legacy system, independent of any transport.

The engine owns a SQLite file (committed batches survive restarts) and hands out one
:class:`EngineSession` per connection. A session holds its open batch in memory only, so losing the
session (close, idle timeout, dropped connection) loses the uncommitted work, exactly like the stateful
systems the kit wraps. COMMIT is deliberately *not* idempotent: the same content twice makes two
batches, which is why the kit needs STATUS (reconcile) and VOID (compensate).

Both the TCP server and the in-process client drive sessions through :meth:`EngineSession.execute`,
so faults, idle timeout and state rules are identical in both modes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from legacy_sim.faults import FaultInjector, Faults
from legacy_sim.protocol import (
    ADD,
    BEGIN,
    COMMIT,
    FAULTS,
    INVALID,
    NOT_FOUND,
    PING,
    ROLLBACK,
    STATE,
    STATUS,
    TRANSIENT,
    VOID,
    CommandError,
    Request,
    encode_json,
)

__all__ = ["DEFAULT_IDLE_TIMEOUT", "EngineSession", "LegacyEngine", "SessionDropped", "format_batch_id"]

DEFAULT_IDLE_TIMEOUT = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    batch_ref TEXT NOT NULL,
    record_count INTEGER NOT NULL,
    voided INTEGER NOT NULL DEFAULT 0,
    committed_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS batches_by_ref ON batches (batch_ref, id);
CREATE TABLE IF NOT EXISTS batch_records (
    batch_id INTEGER NOT NULL REFERENCES batches (id),
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (batch_id, seq)
);
"""


class SessionDropped(Exception):
    """The session is gone (idle timeout, drop-after-commit fault, or closed).

    The transport must end the connection without replying; uncommitted work is lost.
    """


def format_batch_id(row_id: int) -> str:
    """``42`` -> ``"B00000042"``."""
    return f"B{row_id:08d}"


def _parse_batch_id(legacy_batch_id: str) -> int | None:
    if len(legacy_batch_id) < 2 or legacy_batch_id[0] != "B" or not legacy_batch_id[1:].isdigit():
        return None
    return int(legacy_batch_id[1:])


class LegacyEngine:
    """The legacy system: durable committed batches plus fault knobs, shared by all sessions.

    Thread-safe: one SQLite connection guarded by a lock (sessions run in server threads).
    ``idle_timeout`` (seconds, ``None`` = never) is how long a session may sit idle before it is
    dropped; ``clock`` measures it (injectable for fast in-process tests).
    """

    def __init__(
        self,
        db_path: str | Path,
        faults: Faults | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if idle_timeout is not None and idle_timeout <= 0:
            raise ValueError("idle_timeout must be > 0 or None")
        self.db_path = Path(db_path)
        self.clock = clock
        self.idle_timeout = idle_timeout
        self._sleep = sleep
        self._faults = FaultInjector(faults)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(str(self.db_path), check_same_thread=False, isolation_level=None)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)

    # -- faults -------------------------------------------------------------------------------

    @property
    def faults(self) -> Faults:
        return self._faults.current

    def update_faults(self, changes: Mapping[str, Any] | None = None, **knobs: Any) -> Faults:
        """Change fault knobs at run time (the in-process twin of the FAULTS command)."""
        return self._faults.update({**(changes or {}), **knobs})

    @property
    def injector(self) -> FaultInjector:
        return self._faults

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._sleep(seconds)

    # -- sessions -----------------------------------------------------------------------------

    def open_session(self) -> EngineSession:
        """A new session, as a new connection would get."""
        return EngineSession(self)

    # -- durable state ------------------------------------------------------------------------

    def commit_batch(self, batch_ref: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        """Store a batch and its records in one SQLite transaction; answers the COMMIT reply."""
        rows = [encode_json(record) for record in records]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                cur = self._conn.execute(
                    "INSERT INTO batches (batch_ref, record_count, committed_at) VALUES (?, ?, ?)",
                    (batch_ref, len(rows), time.time()),
                )
                batch_id = int(cur.lastrowid or 0)
                self._conn.executemany(
                    "INSERT INTO batch_records (batch_id, seq, data) VALUES (?, ?, ?)",
                    [(batch_id, seq, data) for seq, data in enumerate(rows)],
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return {"legacy_batch_id": format_batch_id(batch_id), "record_count": len(rows)}

    def batch_status(self, batch_ref: str) -> dict[str, Any]:
        """Every committed batch under ``batch_ref``, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, record_count, voided FROM batches WHERE batch_ref = ? ORDER BY id", (batch_ref,)
            ).fetchall()
        batches = [
            {"legacy_batch_id": format_batch_id(i), "record_count": n, "voided": bool(v)} for i, n, v in rows
        ]
        return {"batch_ref": batch_ref, "committed": bool(batches), "batches": batches}

    def void_batch(self, legacy_batch_id: str) -> dict[str, Any]:
        """Mark a batch voided; repeating it answers ``already_voided: true``. Unknown id: NOT_FOUND."""
        row_id = _parse_batch_id(legacy_batch_id)
        with self._lock:
            row = None
            if row_id is not None:
                row = self._conn.execute("SELECT voided FROM batches WHERE id = ?", (row_id,)).fetchone()
            if row is None:
                raise CommandError(NOT_FOUND, f"no batch {legacy_batch_id}")
            already = bool(row[0])
            if not already:
                self._conn.execute("UPDATE batches SET voided = 1 WHERE id = ?", (row_id,))
        return {"legacy_batch_id": legacy_batch_id, "already_voided": already}

    def committed_batches(self) -> list[dict[str, Any]]:
        """All committed batches with their records in order (what ``python -m legacy_sim dump`` prints)."""
        with self._lock:
            batches = self._conn.execute(
                "SELECT id, batch_ref, record_count, voided FROM batches ORDER BY id"
            ).fetchall()
            records = self._conn.execute(
                "SELECT batch_id, data FROM batch_records ORDER BY batch_id, seq"
            ).fetchall()
        by_batch: dict[int, list[Any]] = {}
        for batch_id, data in records:
            by_batch.setdefault(batch_id, []).append(json.loads(data))
        return [
            {
                "legacy_batch_id": format_batch_id(i),
                "batch_ref": ref,
                "record_count": n,
                "records": by_batch.get(i, []),
                "voided": bool(v),
            }
            for i, ref, n, v in batches
        ]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class EngineSession:
    """One connection's view of the engine: at most one open batch, held in memory only.

    Not thread-safe; a connection drives it from one thread. After :class:`SessionDropped` (or
    :meth:`close`) the session is dead and every further call raises :class:`SessionDropped`.
    """

    def __init__(self, engine: LegacyEngine) -> None:
        self._engine = engine
        self._open_ref: str | None = None
        self._records: list[dict[str, Any]] = []
        self._alive = True
        self._last_activity = engine.clock()
        self._handlers: dict[str, Callable[[Request], dict[str, Any]]] = {
            BEGIN: self._begin,
            ADD: self._add,
            COMMIT: self._commit,
            ROLLBACK: self._rollback,
            STATUS: self._status,
            VOID: self._void,
            FAULTS: self._faults,
            PING: self._ping,
        }

    @property
    def alive(self) -> bool:
        return self._alive

    def execute(self, request: Request) -> dict[str, Any]:
        """Run one command: idle check, injected latency and errors, then the command itself.

        Returns the OK payload; raises :class:`CommandError` for an ERR reply and
        :class:`SessionDropped` when the connection must end without a reply.
        """
        self._check_alive()
        engine = self._engine
        try:
            engine.sleep(engine.injector.latency_seconds())
            if request.command not in (FAULTS, PING) and engine.injector.roll_error():
                raise CommandError(
                    TRANSIENT, f"injected transient fault on {request.command}; nothing applied"
                )
            return self._handlers[request.command](request)
        finally:
            self._last_activity = engine.clock()

    def close(self) -> None:
        """End the session; uncommitted work is lost."""
        self._alive = False
        self._open_ref = None
        self._records = []

    # -- internals ----------------------------------------------------------------------------

    def _check_alive(self) -> None:
        if not self._alive:
            raise SessionDropped("session is closed")
        timeout = self._engine.idle_timeout
        if timeout is not None and self._engine.clock() - self._last_activity > timeout:
            self.close()
            raise SessionDropped(f"session idle for more than {timeout}s; uncommitted work dropped")

    def _begin(self, request: Request) -> dict[str, Any]:
        if self._open_ref is not None:
            raise CommandError(STATE, f"batch {self._open_ref} is already open in this session")
        ref = _argument(request)
        self._open_ref = ref
        self._records = []
        return {"batch_ref": ref}

    def _add(self, request: Request) -> dict[str, Any]:
        if self._open_ref is None:
            raise CommandError(STATE, "ADD with no open batch")
        if not isinstance(request.payload, dict):
            raise CommandError(INVALID, "a record must be a JSON object")
        self._records.append(request.payload)
        return {"count": len(self._records)}

    def _commit(self, request: Request) -> dict[str, Any]:
        if self._open_ref is None:
            raise CommandError(STATE, "COMMIT with no open batch")
        result = self._engine.commit_batch(self._open_ref, self._records)
        self._open_ref = None
        self._records = []
        if self._engine.injector.roll_drop_after_commit():
            self.close()
            raise SessionDropped("injected fault: connection dropped after commit")
        return result

    def _rollback(self, request: Request) -> dict[str, Any]:
        """Drop the open batch. Without one it is a harmless no-op (``rolled_back: false``)."""
        had_batch = self._open_ref is not None
        discarded = len(self._records)
        self._open_ref = None
        self._records = []
        return {"rolled_back": had_batch, "discarded": discarded}

    def _status(self, request: Request) -> dict[str, Any]:
        return self._engine.batch_status(_argument(request))

    def _void(self, request: Request) -> dict[str, Any]:
        return self._engine.void_batch(_argument(request))

    def _faults(self, request: Request) -> dict[str, Any]:
        try:
            return self._engine.update_faults(request.payload or {}).to_dict()
        except (TypeError, ValueError) as exc:
            raise CommandError(INVALID, str(exc)) from exc

    def _ping(self, request: Request) -> dict[str, Any]:
        return {"pong": True}


def _argument(request: Request) -> str:
    """The batch reference a BEGIN, STATUS or VOID names; the parser requires one, this makes sure."""
    if request.arg is None:
        raise CommandError(INVALID, f"{request.command} needs a batch reference")
    return request.arg
