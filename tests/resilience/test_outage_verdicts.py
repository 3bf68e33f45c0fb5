"""What a port's answer during an outage does to a commit whose reply was lost, through the kit and
the warehouse (a system of the tests' own in a separate process, ``tests/support/warehouse``).

* The honest port raises while the warehouse is down: the reconciler waits, and records the commit
  once it can ask again.
* The port that hides the outage ("nothing committed") makes the reconciler reopen an import whose
  batch landed; the late-commit watch repairs it once the warehouse answers again, within its
  window. This is why ``check-port`` has the rule ``outage_raises_transient``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter.bootstrap import Kit, build
from adapter.config import load_settings
from adapter.domain.identity import Principal
from adapter.services import CommitPolicy
from adapter.store.migrate import upgrade
from tests.support.constants import SECRET
from tests.support.servers import stop_process
from tests.support.warehouse import broken
from tests.support.warehouse.port import WarehousePort, lose_commit_reply, system_down

pytestmark = pytest.mark.slow  # a server process

REPO = Path(__file__).resolve().parents[2]
ALICE = Principal(subject="alice", tenant="acme")
IMMEDIATE = CommitPolicy(retry_wait_initial=0.001, retry_wait_max=0.01, unknown_grace_seconds=0)


@pytest.fixture
def address() -> Iterator[tuple[str, int]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.warehouse.server"], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    port = int(process.stdout.readline().split()[-1])
    try:
        yield ("127.0.0.1", port)
    finally:
        stop_process(process)


def _kit(tmp_path: Path, port: WarehousePort) -> Kit:
    url = f"sqlite:///{tmp_path / 'adapter.db'}"
    upgrade(url)
    settings = load_settings(database_url=url, secret=SECRET, secret_file=str(tmp_path / "unused"))
    return build(settings, legacy=port, commit_policy=IMMEDIATE)


def _lost_commit(kit: Kit, port: WarehousePort) -> tuple[str, str]:
    """(handle, operation id) of a commit that landed in the warehouse and lost its reply."""
    handle = kit.service.begin(ALICE, "items").handle
    kit.service.add(ALICE, handle, [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}])
    with lose_commit_reply(port):
        result = kit.service.commit(ALICE, handle)
    assert result.status == "outcome_unknown" and result.operation_id is not None
    return handle, result.operation_id


def test_an_honest_port_makes_the_reconciler_wait_out_the_outage(
    tmp_path: Path, address: tuple[str, int]
) -> None:
    port = WarehousePort(address)
    kit = _kit(tmp_path, port)
    try:
        handle, operation_id = _lost_commit(kit, port)
        with system_down(port):
            assert kit.service.reconcile() == []  # it cannot ask: nothing is decided
            assert kit.service.status(ALICE, handle).status == "outcome_unknown"

        [resolution] = kit.service.reconcile()
    finally:
        kit.close()

    assert (resolution.operation_id, resolution.status, resolution.finding) == (
        operation_id,
        "succeeded",
        "committed",
    )


def test_a_port_that_hides_the_outage_reopens_a_landed_commit_until_the_watch_finds_it(
    tmp_path: Path, address: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_ADDRESS", f"{address[0]}:{address[1]}")
    port = broken.hides_outage(load_settings())
    kit = _kit(tmp_path, port)
    try:
        handle, operation_id = _lost_commit(kit, port)
        with system_down(port):
            [verdict] = kit.service.reconcile()
            assert (verdict.status, verdict.finding) == ("failed", "not_committed")  # the damage
            assert kit.service.status(ALICE, handle).status == "open"
            kit.service.maintain()  # the watch asks too, and is lied to as well
            assert kit.service.status(ALICE, handle).status == "open"

        kit.service.maintain()  # the warehouse answers again, within the watch's window

        repaired = kit.service.operation_status(ALICE, operation_id=operation_id)
    finally:
        kit.close()
    assert repaired.status == "succeeded"
    assert kit.service.status(ALICE, handle).status == "committed"
