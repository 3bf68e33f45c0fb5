"""Errors that stay clean, over real HTTP on SQLite and PostgreSQL: text no database can store (a
lone surrogate, NUL) is a validation_error, never -32603 or a 500, and every such request still
writes its log line and its metric."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from adapter.bootstrap import build
from adapter.config import load_settings
from adapter.domain.identity import Principal
from adapter.entrypoints.http.app import create_app
from adapter.store import Store
from tests.support.mcp import mcp_headers, modern_meta, parse_body
from tests.support.servers import serve_in_thread

SURROGATE = "\ud800"
NUL = "\x00"


def raw_tool(server: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tools/call whose body is ASCII JSON (``\\ud800`` escapes), as any client may send it."""
    params = {"name": name, "arguments": arguments, "_meta": modern_meta()}
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).encode("ascii")
    headers = mcp_headers("tools/call", name, token=server.mcp_token)
    final = parse_body(server.http.post(server.url + "/mcp", content=body, headers=headers))
    assert isinstance(final, dict)
    return final


def assert_validation_error(reply: dict[str, Any]) -> None:
    assert "error" not in reply, reply  # never a JSON-RPC error such as -32603
    result = reply["result"]
    assert result.get("isError") is True, result
    assert result["content"][0]["text"].startswith("validation_error:"), result


def tool_calls(server: Any, tool: str, outcome: str) -> float:
    text = server.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "adapter_tool_calls_total" and sample.labels == {
                "tool": tool,
                "outcome": outcome,
            }:
                return float(sample.value)
    return 0.0


CASES = [
    ("begin_import", lambda handle: {"target": "cust" + NUL + "omers"}),
    ("begin_import", lambda handle: {"target": "cust" + SURROGATE}),
    ("begin_import", lambda handle: {"target": "customers", "idempotency_key": "k" + NUL}),
    ("add_records", lambda handle: {"handle": handle, "records": [{"name": "Ada" + SURROGATE}]}),
    ("add_records", lambda handle: {"handle": handle, "records": [{SURROGATE: 1}]}),
    ("add_record", lambda handle: {"handle": handle, "record": {"n": SURROGATE}}),
    ("get_import_status", lambda handle: {"handle": handle + SURROGATE}),
    ("get_import_status", lambda handle: {"handle": handle[:-1] + NUL}),
    ("commit_import", lambda handle: {"handle": "imp_" + SURROGATE * 10}),
    ("get_operation_status", lambda handle: {"operation_id": "op" + NUL}),
    ("get_operation_status", lambda handle: {"operation_id": "op" + SURROGATE}),
    ("get_operation_status", lambda handle: {"idempotency_key": "k" + NUL}),
]


@pytest.mark.parametrize(("tool", "arguments"), CASES)
def test_unstorable_text_is_a_validation_error(
    server: Any, alice: Principal, tool: str, arguments: Any, caplog: pytest.LogCaptureFixture
) -> None:
    handle = server.staged(alice, 1)
    before = tool_calls(server, tool, "error:validation_error")
    with caplog.at_level(logging.INFO, logger="adapter.requests"):
        reply = raw_tool(server, tool, arguments(handle))
    assert_validation_error(reply)
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "adapter.requests"]
    assert [(line["tool"], line["outcome"]) for line in lines] == [(tool, "error:validation_error")]
    assert tool_calls(server, tool, "error:validation_error") == before + 1
    # Nothing was staged by the refused call.
    assert server.kit.service.status(alice, handle).record_count == 1


# NUL in the admin API's parameters: 422 (tests/admin/test_admin_api.py).


def test_nul_in_dashboard_params_is_not_a_500(server: Any) -> None:
    login = server.http.post(
        server.url + "/admin/ui/login",
        data={"token": server.operator_token},
        headers={"Origin": server.url},
    )
    assert login.status_code == 303
    for query in ("tenant=a%00b", "principal=%00", "import_id=%00", "idempotency_key=%00", "status=%00"):
        page = server.http.get(server.url + "/admin/ui?" + query)
        assert page.status_code in (200, 400), (query, page.status_code)
        assert "Traceback" not in page.text
    detail = server.http.get(server.url + "/admin/ui/operations/op%00x")
    assert detail.status_code in (400, 404), detail.status_code


# --- /readyz: the store must take a write ------------------------------------------------------------


def _read_only(db_url: str) -> str:
    if db_url.startswith("sqlite"):
        return "sqlite:///file:" + db_url.removeprefix("sqlite:///") + "?mode=ro&uri=true"
    return db_url + "%20-cdefault_transaction_read_only%3Don"


def test_readyz_is_503_on_a_read_only_store(
    store: Store, db_url: str, legacy_address: tuple[str, int], tmp_path: Path
) -> None:
    host, port = legacy_address
    settings = load_settings(
        database_url=db_url,
        legacy_url=f"tcp://{host}:{port}",
        secret="s" * 40,
        secret_file=str(tmp_path / "unused.secret"),
    )
    read_only = Store.from_url(_read_only(db_url))
    with read_only.unit_of_work() as uow:  # it does answer reads
        assert uow.session.execute(text("SELECT 1")).scalar() == 1
    kit = build(settings, store=read_only)
    try:
        with serve_in_thread(create_app(kit, run_maintenance=False)) as url:
            response = httpx.get(url + "/readyz", timeout=10)
    finally:
        kit.close()
    assert response.status_code == 503, response.text
    assert [p.split(":")[0] for p in response.json()["problems"]] == ["database unreachable or read-only"]


# --- a store failure after COMMIT was sent ----------------------------------------------------------

_SQLITE_TRIGGER = """
CREATE TRIGGER fail_finish BEFORE UPDATE ON operations WHEN NEW.status = 'succeeded'
BEGIN SELECT RAISE(ABORT, 'store failure'); END
"""
_PG_TRIGGER = [
    "CREATE FUNCTION fail_finish() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'store failure'; END $$"
    " LANGUAGE plpgsql",
    "CREATE TRIGGER fail_finish BEFORE UPDATE ON operations FOR EACH ROW"
    " WHEN (NEW.status = 'succeeded') EXECUTE FUNCTION fail_finish()",
]


def _store_fails_on_success(store: Store, on: bool) -> None:
    """The database itself refuses to record a success: a real store failure, after COMMIT."""
    sqlite = store.engine.dialect.name == "sqlite"
    with store.engine.begin() as conn:
        if on:
            for statement in [_SQLITE_TRIGGER] if sqlite else _PG_TRIGGER:
                conn.execute(text(statement))
        else:
            conn.execute(text("DROP TRIGGER fail_finish" + ("" if sqlite else " ON operations")))


@pytest.mark.parametrize("settings_overrides", [{"lease_seconds": 1.0, "confirm_commit": "never"}])
def test_a_store_failure_after_commit_is_outcome_unknown_with_the_operation_id(
    server: Any, alice: Principal, legacy_engine: Any
) -> None:
    handle = server.staged(alice, 3)
    _store_fails_on_success(server.kit.store, True)
    try:
        reply = server.tool("commit_import", {"handle": handle})
    finally:
        _store_fails_on_success(server.kit.store, False)
    assert "error" not in reply, reply  # not a bare -32603
    out = reply["structuredContent"]
    assert out["status"] == "outcome_unknown" and out["operation_id"], out
    # The batch is in the legacy system; reconciliation finishes the record once the lease ran out.
    time.sleep(1.2)
    server.kit.service.reconcile()
    view = server.kit.service.operation_status(alice, operation_id=out["operation_id"])
    assert view.status == "succeeded", view
    assert len(legacy_engine.committed_batches()) == 1
