"""``make demo``: a short end-to-end run of the import core against the simulator over TCP.

It starts ``python -m legacy_sim serve`` as a separate process on a free port, builds the kit on a
fresh SQLite database in a temporary folder, and walks through the scenarios the kit exists for:
handles, idempotent replays, progress, a replayed commit, isolation between principals, an abort,
a compensation, and a lost reply after COMMIT that is recorded as ``outcome_unknown``. Every step
checks its own outcome; the demo exits non-zero if one does not hold.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from adapter.bootstrap import build
from adapter.config import load_settings
from adapter.domain.errors import HandleNotFound
from adapter.domain.identity import Principal
from adapter.services import ImportService
from adapter.store.migrate import upgrade
from legacy_sim.client import LegacyClient

__all__ = ["run_demo"]


class DemoFailure(Exception):
    """A scenario did not behave as the kit promises."""


def check(condition: bool, what: str) -> None:
    if not condition:
        raise DemoFailure(what)
    print(f"   ok  {what}")


@contextmanager
def legacy_simulator(folder: Path) -> Iterator[tuple[str, int]]:
    """Run the simulator as its own process, as a real legacy system would run."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "legacy_sim",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--db",
            str(folder / "legacy.db"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        host, port = line.rsplit(" ", 1)[-1].rsplit(":", 1)
        yield host, int(port)
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_demo(records: int = 1200) -> int:
    with (
        tempfile.TemporaryDirectory(prefix="adapter-demo-") as tmp,
        legacy_simulator(Path(tmp)) as (host, port),
    ):
        database = f"sqlite:///{tmp}/adapter.db"
        upgrade(database)
        settings = load_settings(
            database_url=database, legacy_url=f"tcp://{host}:{port}", secret=secrets.token_hex(32)
        )
        kit = build(settings)
        try:
            print(f"legacy simulator over TCP at {host}:{port}; store {database}")
            _scenarios(kit.service, LegacyClient(host, port, timeout=5.0), records)
        except DemoFailure as exc:
            print(f"FAILED: {exc}", file=sys.stderr)
            return 1
        finally:
            kit.close()
    print("demo finished: every scenario behaved as promised")
    return 0


def _scenarios(service: ImportService, legacy: LegacyClient, total: int) -> None:
    alice = Principal("alice", "acme")
    mallory = Principal("mallory", "acme")

    print("1. begin_import returns an opaque handle; a replay returns the same one")
    begun = service.begin(alice, "customers", idempotency_key="demo-begin")
    again = service.begin(alice, "customers", idempotency_key="demo-begin")
    check(again.handle == begun.handle and again.replayed, f"same handle on replay ({begun.handle[:10]}...)")
    handle = begun.handle

    print(f"2. stage {total} records in batches of 500; a replayed batch is staged once")
    rows = [{"customer_id": i, "name": f"Customer {i}"} for i in range(total)]
    for start in range(0, total, 500):
        service.add(alice, handle, rows[start : start + 500], idempotency_key=f"demo-add-{start}")
    replay = service.add(alice, handle, rows[0:500], idempotency_key="demo-add-0")
    staged = service.status(alice, handle).record_count
    check(
        replay.replayed and staged == total, f"{staged} records staged; the replay answered its first result"
    )

    print("3. another principal cannot see or use the handle")
    try:
        service.status(mallory, handle)
        check(False, "mallory was refused")
    except HandleNotFound as exc:
        check(True, f"mallory gets '{exc}'")

    print("4. commit replays the records into ONE legacy session, with progress")
    steps: list[int] = []
    result = service.commit(
        alice, handle, idempotency_key="demo-commit", progress=lambda sent, of: steps.append(sent)
    )
    print(f"   progress: {', '.join(str(s) for s in steps)} of {total}")
    check(result.status == "committed", f"committed as legacy batch {result.legacy_batch_id}")

    print("5. a retried commit returns the recorded result; the legacy system holds one batch")
    retried = service.commit(alice, handle, idempotency_key="demo-commit")
    status = legacy.status(f"adp-{result.operation_id}")
    check(
        retried.replayed and retried.legacy_batch_id == result.legacy_batch_id, "same result, marked replayed"
    )
    check(len(status["batches"]) == 1 and status["batches"][0]["record_count"] == total, "exactly one batch")

    print("6. abort of an open import drops its staged records")
    other = service.begin(alice, "suppliers").handle
    service.add(alice, other, [{"supplier": 1}])
    check(service.abort(alice, other).status == "aborted", "aborted")

    print("7. abort of a committed import compensates: the legacy batch is voided once")
    check(service.abort(alice, handle).status == "compensated", "compensated")
    check(legacy.status(f"adp-{result.operation_id}")["batches"][0]["voided"], "legacy batch voided")

    print("8. a reply lost after COMMIT is recorded as outcome_unknown, never as failed")
    lost = service.begin(alice, "orders").handle
    service.add(alice, lost, [{"order": 1}, {"order": 2}])
    legacy.faults(drop_after_commit=1.0)
    unknown = service.commit(alice, lost)
    legacy.faults(drop_after_commit=0.0)
    check(unknown.status == "outcome_unknown", "outcome_unknown")
    history = service.operation_status(alice, operation_id=unknown.operation_id)
    check(history.recovery_point == "commit_sent", "recovery point commit_sent was recorded before COMMIT")
    truth = legacy.status(f"adp-{unknown.operation_id}")
    print(f"   the legacy system says: committed={truth['committed']} (reconciliation will record this)")
    print("   history:", json.dumps([entry.event for entry in history.history]))
