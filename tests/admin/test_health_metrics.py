"""/readyz and /metrics over real HTTP, and the instrumented legacy port."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapter.domain.identity import Principal
from adapter.entrypoints.http.app import create_app
from adapter.legacy.instrumented import InstrumentedPort
from adapter.ports.legacy import LegacyOutcomeUnknown, LegacyTransient
from adapter.store import Store
from legacy_sim.engine import LegacyEngine
from tests.support.kit import kit_settings, running_kit
from tests.support.servers import serve_in_thread


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a Prometheus text exposition."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def families(text: str) -> dict[str, str]:
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- /readyz ---------------------------------------------------------------------------------------


def test_readyz_is_open_and_ready_when_database_and_legacy_answer(server: Any) -> None:
    response = server.get("/readyz", token=None)
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "problems": []}


def test_readyz_is_503_with_the_reasons_when_the_legacy_system_is_down(
    store: Store, db_url: str, tmp_path: Any
) -> None:
    settings = kit_settings(db_url, ("127.0.0.1", closed_port()), tmp_path, legacy_timeout_seconds=2.0)
    with (
        running_kit(settings, store) as kit,
        serve_in_thread(create_app(kit, run_maintenance=False)) as url,
    ):
        response = httpx.get(url + "/readyz", timeout=10)
        healthz = httpx.get(url + "/healthz", timeout=10)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert [p.split(":")[0] for p in body["problems"]] == ["legacy system unreachable"]
    assert healthz.status_code == 200, "liveness says nothing about dependencies"


# --- /metrics ---------------------------------------------------------------------------------------


def test_metrics_need_an_admin_token_when_admin_is_enabled(server: Any) -> None:
    assert server.get("/metrics", token=None).status_code == 401
    assert server.get("/metrics", token="wrong-" + "x" * 20).status_code == 401
    for token in (server.viewer_token, server.operator_token):
        response = server.get("/metrics", token=token)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")


def test_metrics_carry_the_four_families_with_sensible_values(
    server: Any, legacy_engine: LegacyEngine, alice: Principal, bob: Principal
) -> None:
    server.committed(bob, 2)
    server.outcome_unknown(alice, legacy_engine)
    begun = server.tool("begin_import", {"target": "customers"})
    assert not begun.get("isError"), begun
    failed = server.tool("get_import_status", {"handle": "not-a-handle"})
    assert failed.get("isError") is True
    assert "error" in server.tool("no_such_tool", {})

    text = server.get("/metrics", token=server.viewer_token).text
    kinds = families(text)
    assert kinds["adapter_operations"] == "gauge"
    assert kinds["adapter_reconciliation_lag_seconds"] == "gauge"
    assert kinds["adapter_legacy_call_duration_seconds"] == "histogram"
    assert kinds["adapter_tool_calls"] == "counter"
    values = samples(text)

    counts = server.kit.admin.status_counts()
    for status in ("succeeded", "outcome_unknown", "needs_operator", "resolved"):
        assert values[("adapter_operations", (("status", status),))] == counts.get(status, 0)
    assert values[("adapter_operations", (("status", "outcome_unknown"),))] == 1
    assert values[("adapter_store_up", ())] == 1
    lag = values[("adapter_reconciliation_lag_seconds", ())]
    assert 0 < lag < 120, "the outcome_unknown operation has waited a little"

    def legacy(command: str, outcome: str) -> float:
        key = (("command", command), ("outcome", outcome))
        return values.get(("adapter_legacy_call_duration_seconds_count", key), 0)

    assert legacy("commit", "ok") == 1
    assert legacy("commit", "outcome_unknown") == 1
    assert legacy("open_session", "ok") >= 2 and legacy("add", "ok") >= 2
    ok_sum = values[("adapter_legacy_call_duration_seconds_sum", (("command", "commit"), ("outcome", "ok")))]
    assert 0 < ok_sum < 10

    tools = {
        (dict(labels)["tool"], dict(labels)["outcome"]): value
        for (name, labels), value in values.items()
        if name == "adapter_tool_calls_total"
    }
    assert tools[("begin_import", "ok")] == 1
    [(status_outcome, one)] = [(o, v) for (t, o), v in tools.items() if t == "get_import_status"]
    assert status_outcome.startswith("error:") and one == 1
    [(unknown_outcome, one)] = [(o, v) for (t, o), v in tools.items() if t == "unknown"]
    assert unknown_outcome != "ok" and one == 1, "a tool the server does not know is labelled unknown"
    assert sum(tools.values()) == 3

    # Reconciling clears the lag.
    server.kit.service.reconcile()
    after = samples(server.get("/metrics", token=server.viewer_token).text)
    assert after[("adapter_reconciliation_lag_seconds", ())] == 0
    assert after[("adapter_operations", (("status", "outcome_unknown"),))] == 0


def test_each_app_has_its_own_registry(kit: Any) -> None:
    first, second = create_app(kit, run_maintenance=False), create_app(kit, run_maintenance=False)
    assert first.state.metrics.registry is not second.state.metrics.registry
    kit.admin.check_ready()  # one batch_status call, seen by both
    for app in (first, second):
        text = app.state.metrics.render().decode()
        assert 'adapter_legacy_call_duration_seconds_count{command="batch_status",outcome="ok"} 1.0' in text


# --- the instrumented port ------------------------------------------------------------------------


class _FlakySession:
    def begin(self, batch_ref: str) -> None: ...
    def add(self, records: Any) -> None:
        raise LegacyTransient("down")

    def commit(self) -> Any:
        raise LegacyOutcomeUnknown("lost")

    def rollback(self) -> None: ...
    def close(self) -> None: ...


class _FlakyPort:
    closed = False

    def open_session(self) -> _FlakySession:
        return _FlakySession()

    def batch_status(self, batch_ref: str) -> Any:
        raise RuntimeError("bug")

    def void_batch(self, legacy_batch_id: str) -> Any:
        return "voided"

    def close(self) -> None:
        self.closed = True


def test_the_instrumented_port_reports_every_call_and_changes_nothing() -> None:
    seen: list[tuple[str, str]] = []
    inner = _FlakyPort()
    port = InstrumentedPort(inner, lambda command, seconds, outcome: seen.append((command, outcome)))
    remove_broken = port.add_observer(lambda *_: 1 / 0)  # a failing observer never breaks a call

    session = port.open_session()
    session.begin("ref")
    with pytest.raises(LegacyTransient):
        session.add([{"n": 1}])
    with pytest.raises(LegacyOutcomeUnknown):
        session.commit()
    session.close()
    with pytest.raises(RuntimeError):
        port.batch_status("ref")
    assert port.void_batch("B1") == "voided"
    remove_broken()
    port.close()

    assert seen == [
        ("open_session", "ok"),
        ("begin", "ok"),
        ("add", "transient"),
        ("commit", "outcome_unknown"),
        ("close", "ok"),
        ("batch_status", "error"),
        ("void_batch", "ok"),
    ]
    assert inner.closed
