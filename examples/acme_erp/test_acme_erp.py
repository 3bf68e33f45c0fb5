"""The Acme ERP port against the fake ERP over real HTTP: the contract kit, then the kit's service layer.

Run from the repository: ``python -m pytest examples/acme_erp`` (the kit's suite runs it too).
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from acme_erp import port as erp
from acme_erp.fake_server import create_app
from adapter.bootstrap import build
from adapter.config import load_settings
from adapter.domain.identity import Principal
from adapter.services import ImportService
from adapter.store.migrate import upgrade
from adapter.testing import PortContract

TOKEN = "test-" + secrets.token_hex(8)
ALICE = Principal(subject="alice", tenant="acme")


@pytest.fixture(scope="module")
def erp_url() -> Iterator[str]:
    """The fake ERP served by uvicorn on a free loopback port, in a thread."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(TOKEN), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "fake ERP did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def erp_port(erp_url: str) -> Iterator[erp.ErpPort]:
    port = erp.ErpPort(erp_url, TOKEN, timeout=10)
    yield port
    port.close()


class TestErpPortContract(PortContract):
    @pytest.fixture
    def port(self, erp_port: erp.ErpPort) -> erp.ErpPort:
        return erp_port

    @pytest.fixture
    def lose_commit_reply(self):  # type: ignore[no-untyped-def]
        return erp.lose_commit_reply

    @pytest.fixture
    def system_down(self):  # type: ignore[no-untyped-def]
        return erp.system_down


@pytest.fixture
def service(tmp_path: Path, erp_port: erp.ErpPort) -> Iterator[ImportService]:
    url = f"sqlite:///{tmp_path / 'adapter.db'}"
    upgrade(url)
    kit = build(load_settings(database_url=url, secret=secrets.token_hex(32)), legacy=erp_port)
    yield kit.service
    kit.close()


def test_an_import_lands_as_one_erp_batch_and_abort_voids_it(
    service: ImportService, erp_port: erp.ErpPort
) -> None:
    handle = service.begin(ALICE, "customers").handle
    customers = [{"number": f"C{i}", "name": f"Customer {i}"} for i in range(1, 1201)]
    service.add(ALICE, handle, customers[:600])
    service.add(ALICE, handle, customers[600:])
    result = service.commit(ALICE, handle)

    assert result.status == "committed"
    [batch] = erp_port.batch_status(f"adp-{result.operation_id}").batches
    assert (batch.record_count, batch.voided) == (1200, False)
    assert service.abort(ALICE, handle).status == "compensated"
    assert erp_port.batch_status(f"adp-{result.operation_id}").batches[0].voided


def test_a_lost_commit_reply_is_outcome_unknown_and_reconciled_without_a_second_batch(
    service: ImportService, erp_port: erp.ErpPort
) -> None:
    handle = service.begin(ALICE, "invoices").handle
    service.add(ALICE, handle, [{"customer": "C1", "amount_cents": 990, "due": "2027-01-31"}])
    with erp.lose_commit_reply(erp_port):
        result = service.commit(ALICE, handle)
    assert result.status == "outcome_unknown"

    [resolution] = service.reconcile(result.operation_id)

    assert (resolution.status, resolution.finding) == ("succeeded", "committed")
    assert len(erp_port.batch_status(f"adp-{result.operation_id}").batches) == 1
