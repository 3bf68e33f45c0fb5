"""The admin JSON API over real HTTP: listing, filters, pagination, detail, roles, actions and audit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapter.domain.identity import Principal
from legacy_sim.engine import LegacyEngine

OPS = "/admin/operations"


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [item.get("operation_id") or item["import_id"] for item in items]


# --- listing and filters ---------------------------------------------------------------------------


def test_list_operations_with_each_filter(
    server: Any, alice: Principal, bob: Principal, carol: Principal
) -> None:
    server.staged(alice, key="k-alice")
    _, bob_commit = server.committed(bob)
    server.staged(carol, target="orders")
    everything = server.all_operations()
    assert len(everything) == 7  # alice begin+add, bob begin+add+commit, carol begin+add
    assert len(set(ids(everything))) == 7
    created = [item["created_at"] for item in everything]
    assert created == sorted(created, reverse=True), "newest first"
    bob_import = server.detail(bob_commit.operation_id)["operation"]["import_id"]

    def expect(filters: dict[str, Any], keep: Any) -> None:
        got = server.all_operations(**filters)
        wanted = [item for item in everything if keep(item)]
        assert wanted, filters
        assert ids(got) == ids(wanted), filters

    expect({"status": "succeeded"}, lambda o: o["status"] == "succeeded")
    expect({"kind": "commit"}, lambda o: o["kind"] == "commit")
    expect({"kind": "add"}, lambda o: o["kind"] == "add")
    expect({"principal": "bob"}, lambda o: o["principal"] == "bob")
    expect({"tenant": "globex"}, lambda o: o["tenant"] == "globex")
    expect({"idempotency_key": "k-alice"}, lambda o: o["idempotency_key"] == "k-alice")
    expect({"import_id": bob_import}, lambda o: o["import_id"] == bob_import)
    expect({"principal": "bob", "kind": "commit"}, lambda o: o["operation_id"] == bob_commit.operation_id)
    middle = everything[3]["created_at"]
    expect({"since": middle}, lambda o: o["created_at"] >= middle)
    expect({"until": middle}, lambda o: o["created_at"] < middle)
    expect({"since": everything[-1]["created_at"], "until": middle}, lambda o: o["created_at"] < middle)
    # a naive ISO date-time means UTC
    future = (datetime.now(UTC) + timedelta(hours=1)).replace(tzinfo=None).isoformat()
    assert server.all_operations(since=future) == []
    assert len(server.all_operations(until=future)) == 7
    assert server.all_operations(principal="nobody") == []
    assert server.get(OPS, status="no-such-status").status_code == 422


def test_list_imports_with_each_filter(
    server: Any, alice: Principal, bob: Principal, carol: Principal
) -> None:
    server.staged(alice)
    server.committed(bob)
    server.staged(carol, target="orders")
    everything = server.ok(server.get("/admin/imports"))["items"]
    assert [i["principal"] for i in everything] == ["carol", "bob", "alice"]
    assert all("handle" not in item for item in everything)

    def expect(filters: dict[str, Any], names: list[str]) -> None:
        got = server.ok(server.get("/admin/imports", **filters))["items"]
        assert [i["principal"] for i in got] == names, filters

    expect({"status": "committed"}, ["bob"])
    expect({"status": "open"}, ["carol", "alice"])
    expect({"principal": "alice"}, ["alice"])
    expect({"tenant": "acme"}, ["bob", "alice"])
    expect({"target": "orders"}, ["carol"])
    expect({"since": everything[1]["created_at"]}, ["carol", "bob"])
    expect({"until": everything[1]["created_at"]}, ["alice"])
    expect({"status": "committed", "tenant": "globex"}, [])
    page = server.ok(server.get("/admin/imports", limit=2))
    assert len(page["items"]) == 2 and page["next_cursor"]
    rest = server.ok(server.get("/admin/imports", limit=2, cursor=page["next_cursor"]))
    assert [i["principal"] for i in rest["items"]] == ["alice"] and rest["next_cursor"] is None


def test_limit_is_bounded(server: Any, alice: Principal) -> None:
    server.staged(alice)
    assert server.get(OPS, limit=0).status_code == 422
    assert server.get(OPS, limit=201).status_code == 422
    assert len(server.ok(server.get(OPS, limit=200))["items"]) == 2
    assert server.ok(server.get(OPS, limit=1))["next_cursor"]


# --- pagination ---------------------------------------------------------------------------------------


def test_pagination_under_concurrent_inserts_has_no_duplicates_or_gaps(
    server: Any, alice: Principal, bob: Principal
) -> None:
    for _ in range(4):
        server.staged(alice, 1)  # 8 operations of alice
    for _ in range(2):
        server.staged(bob, 1)  # 4 of bob
    assert (len(server.all_operations()), len(server.all_operations(principal="alice"))) == (12, 8)
    before_all = 12

    for filters in ({}, {"principal": "alice"}):
        expected = ids(server.all_operations(**filters))  # what is there when the walk starts
        seen: list[str] = []
        page = server.ok(server.get(OPS, limit=3, **filters))
        while True:
            seen += ids(page["items"])
            server.staged(alice, 1)  # new operations arrive between every two pages
            server.kit.service.begin(bob, "customers")
            if page["next_cursor"] is None:
                break
            page = server.ok(server.get(OPS, limit=3, cursor=page["next_cursor"], **filters))
        assert seen == expected, "the list is frozen at its first page: no duplicates, no gaps"

    # A fresh listing sees what arrived meanwhile.
    assert len(server.all_operations()) > before_all


def test_a_cursor_only_works_with_its_own_filters(server: Any, alice: Principal, bob: Principal) -> None:
    server.staged(alice)
    server.staged(bob)
    first = server.ok(server.get(OPS, limit=1, principal="alice"))
    cursor = first["next_cursor"]
    assert cursor
    assert server.get(OPS, limit=1, principal="alice", cursor=cursor).status_code == 200
    for response in (
        server.get(OPS, limit=1, principal="bob", cursor=cursor),
        server.get(OPS, limit=1, cursor=cursor),
        server.get(OPS, limit=1, principal="alice", kind="add", cursor=cursor),
        server.get("/admin/imports", limit=1, principal="alice", cursor=cursor),
        server.get(OPS, limit=1, principal="alice", cursor=cursor[:-2] + "xx"),
        server.get(OPS, cursor="not-a-cursor"),
    ):
        assert response.status_code == 400, response.text
        assert response.json() == {"code": "invalid_cursor", "detail": "Invalid cursor"}


# --- detail -------------------------------------------------------------------------------------------


def test_operation_detail_shows_steps_import_and_never_a_handle(server: Any, bob: Principal) -> None:
    handle, commit = server.committed(bob, 4)
    response = server.get(f"{OPS}/{commit.operation_id}")
    assert handle not in response.text
    detail = server.ok(response)
    assert set(detail) == {
        "operation",
        "result",
        "error",
        "batch_ref",
        "lease",
        "steps",
        "compensation",
        "audit",
        "import_record",
    }
    op = detail["operation"]
    assert (op["operation_id"], op["kind"], op["status"], op["principal"], op["tenant"]) == (
        commit.operation_id,
        "commit",
        "succeeded",
        "bob",
        "acme",
    )
    assert detail["result"]["legacy_batch_id"] == commit.legacy_batch_id
    assert detail["batch_ref"]
    assert detail["steps"] and all({"at", "event", "state", "detail"} <= set(s) for s in detail["steps"])
    assert detail["audit"] == [] and detail["compensation"] is None
    imported = detail["import_record"]
    assert (imported["import_id"], imported["status"], imported["record_count"]) == (
        op["import_id"],
        "committed",
        4,
    )
    assert imported["legacy_batch_id"] == commit.legacy_batch_id

    record = server.ok(server.get(f"/admin/imports/{op['import_id']}"))
    assert handle not in str(record)
    assert record["import_record"] == imported
    assert [o["kind"] for o in record["operations"]] == ["begin", "add", "commit"]


def test_unknown_ids_are_404(server: Any) -> None:
    missing = server.get(f"{OPS}/does-not-exist")
    assert missing.status_code == 404 and missing.json()["code"] == "operation_not_found"
    missing = server.get("/admin/imports/does-not-exist")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    for action in ("reconcile", "compensate"):
        assert server.post(f"{OPS}/does-not-exist/{action}").status_code == 404
    assert server.post(f"{OPS}/does-not-exist/resolve", {"reason": "x"}).status_code == 404


# --- roles ----------------------------------------------------------------------------------------------


def test_viewer_reads_but_may_not_act(server: Any, legacy_engine: LegacyEngine, alice: Principal) -> None:
    unknown = server.outcome_unknown(alice, legacy_engine)
    viewer = server.viewer_token
    assert server.get(OPS, token=viewer).status_code == 200
    assert server.get(f"{OPS}/{unknown.operation_id}", token=viewer).status_code == 200
    assert server.get("/admin/imports", token=viewer).status_code == 200
    for action, body in (("reconcile", None), ("compensate", None), ("resolve", {"reason": "r"})):
        refused = server.post(f"{OPS}/{unknown.operation_id}/{action}", body, token=viewer)
        assert refused.status_code == 403, refused.text
    detail = server.detail(unknown.operation_id)
    assert detail["operation"]["status"] == "outcome_unknown", "a viewer changed nothing"
    assert detail["audit"] == []


def test_no_or_a_wrong_token_is_401(server: Any, alice: Principal) -> None:
    server.staged(alice)
    [op, *_] = server.all_operations()
    for token in (None, "wrong-token-" + "x" * 20, server.viewer_token + "x"):
        for response in (
            server.get(OPS, token=token),
            server.get(f"{OPS}/{op['operation_id']}", token=token),
            server.get("/admin/imports", token=token),
            server.post(f"{OPS}/{op['operation_id']}/reconcile", token=token),
        ):
            assert response.status_code == 401, response.text
            assert response.headers["www-authenticate"] == "Bearer"
    # The dashboard's cookie (a session opened by its login form) is accepted too; the token is not.
    by_cookie = server.http.get(server.url + OPS, headers={"Cookie": f"adapter_admin={_session(server)}"})
    assert by_cookie.status_code == 200
    raw = server.http.get(server.url + OPS, headers={"Cookie": f"adapter_admin={server.viewer_token}"})
    assert raw.status_code == 401


def _session(server: Any, token: str | None = None) -> str:
    """A dashboard session id, from the login form."""
    login = server.http.post(
        server.url + "/admin/ui/login",
        data={"token": token or server.viewer_token},
        headers={"Origin": server.url},
    )
    assert login.status_code == 303, login.text
    session = login.cookies.get("adapter_admin")
    server.http.cookies.clear()  # each request below says itself which cookie it sends
    assert session
    return str(session)


def test_the_dashboard_cookie_alone_cannot_act_through_the_api(
    server: Any, legacy_engine: LegacyEngine, alice: Principal
) -> None:
    """A browser attaches the cookie to any request it is tricked into sending; actions need the header."""
    unknown = server.outcome_unknown(alice, legacy_engine)
    session = _session(server, server.operator_token)
    cookie = {"Cookie": f"adapter_admin={session}", "Origin": "http://127.0.0.1:1"}

    refused = server.http.post(f"{server.url}{OPS}/{unknown.operation_id}/reconcile", headers=cookie)

    assert refused.status_code == 401, refused.text
    assert server.detail(unknown.operation_id)["audit"] == []
    assert server.post(f"{OPS}/{unknown.operation_id}/reconcile").status_code == 200


@pytest.mark.parametrize("settings_overrides", [{"admin_token": None, "admin_readonly_token": None}])
def test_without_an_admin_token_admin_does_not_exist(server: Any, alice: Principal) -> None:
    server.staged(alice)
    for token in (None, server.operator_token):
        assert server.get(OPS, token=token).status_code == 404
        assert server.get("/admin/imports", token=token).status_code == 404
        assert server.post(f"{OPS}/x/reconcile", token=token).status_code == 404
    # /metrics is open to loopback clients instead; /readyz is always open.
    assert server.get("/metrics", token=None).status_code == 200
    assert server.get("/readyz", token=None).status_code == 200


# --- actions and their audit trail --------------------------------------------------------------------


def test_reconcile_an_outcome_unknown_operation_and_audit_it(
    server: Any, legacy_engine: LegacyEngine, alice: Principal
) -> None:
    unknown = server.outcome_unknown(alice, legacy_engine)
    assert server.detail(unknown.operation_id)["operation"]["status"] == "outcome_unknown"
    before = datetime.now(UTC)

    acted = server.ok(server.post(f"{OPS}/{unknown.operation_id}/reconcile", {"reason": "ticket 42"}))

    assert acted == {
        "operation_id": unknown.operation_id,
        "action": "reconcile",
        "outcome": "reconciled: committed",
        "status": "succeeded",
        "detail": {"finding": "committed"},
    }
    detail = server.detail(unknown.operation_id)
    assert detail["operation"]["status"] == "succeeded"
    assert detail["import_record"]["status"] == "committed"
    assert "operation.reconciled" in [s["event"] for s in detail["steps"]]
    [entry] = detail["audit"]
    assert (entry["actor"], entry["action"], entry["reason"], entry["outcome"]) == (
        "operator",
        "reconcile",
        "ticket 42",
        "reconciled: committed",
    )
    assert before - timedelta(seconds=5) <= datetime.fromisoformat(entry["at"]) <= datetime.now(UTC)

    again = server.ok(server.post(f"{OPS}/{unknown.operation_id}/reconcile"))  # idempotent
    assert again["status"] == "succeeded" and again["outcome"].startswith("nothing to reconcile")
    audit = server.detail(unknown.operation_id)["audit"]
    assert [(a["action"], a["reason"]) for a in audit] == [("reconcile", "ticket 42"), ("reconcile", None)]
    assert len(legacy_engine.committed_batches()) == 1


def test_reconcile_with_the_legacy_system_failing_is_503_and_audited(
    server: Any, legacy_engine: LegacyEngine, alice: Principal
) -> None:
    unknown = server.outcome_unknown(alice, legacy_engine)
    legacy_engine.update_faults(error_rate=1.0)
    try:
        refused = server.post(f"{OPS}/{unknown.operation_id}/reconcile", {"reason": "try now"})
    finally:
        legacy_engine.update_faults(error_rate=0.0)
    assert refused.status_code == 503, refused.text
    assert refused.json()["code"] == "legacy_unavailable"
    detail = server.detail(unknown.operation_id)
    assert detail["operation"]["status"] == "outcome_unknown"
    [entry] = detail["audit"]
    assert (entry["action"], entry["reason"], entry["outcome"]) == (
        "reconcile",
        "try now",
        "refused: LegacyTransient",
    )
    # Once the legacy system answers again, the same action resolves it.
    assert server.ok(server.post(f"{OPS}/{unknown.operation_id}/reconcile"))["status"] == "succeeded"


def test_compensate_twice_voids_the_batch_once(
    server: Any, legacy_engine: LegacyEngine, bob: Principal
) -> None:
    _, commit = server.committed(bob, 3)
    path = f"{OPS}/{commit.operation_id}/compensate"

    first = server.ok(server.post(path, {"reason": "wrong file"}))
    second = server.ok(server.post(path))

    assert first["outcome"] == second["outcome"] == "import compensated"
    [batch] = legacy_engine.committed_batches()
    assert (batch["legacy_batch_id"], batch["voided"]) == (commit.legacy_batch_id, True)
    detail = server.detail(commit.operation_id)
    assert detail["compensation"]["status"] == "compensated"
    assert detail["compensation"]["attempts"] == 1, "one VOID"
    assert detail["import_record"]["status"] == "compensated"
    assert [(a["action"], a["reason"], a["outcome"]) for a in detail["audit"]] == [
        ("compensate", "wrong file", "import compensated"),
        ("compensate", None, "import compensated"),
    ]
    operations = server.ok(server.get(f"/admin/imports/{detail['operation']['import_id']}"))["operations"]
    assert [o["kind"] for o in operations].count("compensate") == 1
    metrics = server.get("/metrics", token=server.viewer_token).text
    assert 'adapter_legacy_call_duration_seconds_count{command="void_batch",outcome="ok"} 1.0' in metrics


def test_a_refused_compensation_is_audited(server: Any, alice: Principal) -> None:
    server.staged(alice)
    [add, _begin] = server.all_operations()
    refused = server.post(f"{OPS}/{add['operation_id']}/compensate", {"reason": "not committed yet"})
    assert refused.status_code == 409 and refused.json()["code"] == "invalid_state"
    [entry] = server.detail(add["operation_id"])["audit"]
    assert (entry["actor"], entry["action"], entry["reason"], entry["outcome"]) == (
        "operator",
        "compensate",
        "not committed yet",
        "refused: InvalidState",
    )


def test_resolve_needs_a_reason_and_an_operation_that_needs_an_operator(
    server: Any, legacy_engine: LegacyEngine, bob: Principal
) -> None:
    commit_id, compensation_id = server.needs_operator(bob, legacy_engine)
    path = f"{OPS}/{compensation_id}/resolve"
    stuck = server.detail(compensation_id)
    assert stuck["error"]["code"] == "compensation_failed"
    assert stuck["compensation"]["status"] == "needs_operator"

    assert server.post(path).status_code == 422  # no body: the reason is required
    assert server.post(path, {}).status_code == 422
    assert server.post(path, {"reason": ""}).status_code == 422
    blank = server.post(path, {"reason": "   "})
    assert blank.status_code == 400 and blank.json()["code"] == "validation_error"

    refused = server.post(f"{OPS}/{commit_id}/resolve", {"reason": "tidy up"})  # it succeeded
    assert refused.status_code == 409, refused.text
    compensated, entry = server.detail(commit_id)["audit"]
    assert (compensated["action"], compensated["outcome"]) == ("compensate", "import compensating")
    assert (entry["action"], entry["reason"], entry["outcome"]) == (
        "resolve",
        "tidy up",
        "refused: InvalidState",
    )

    resolved = server.ok(server.post(path, {"reason": "voided by hand in the legacy console"}))
    assert (resolved["status"], resolved["outcome"]) == ("resolved", "resolved")
    again = server.ok(server.post(path, {"reason": "double click"}))
    assert (again["status"], again["outcome"]) == ("resolved", "already resolved")
    detail = server.detail(compensation_id)
    assert detail["operation"]["status"] == "resolved"
    assert "operation.resolved" in [s["event"] for s in detail["steps"]]
    assert [(a["actor"], a["action"], a["reason"], a["outcome"]) for a in detail["audit"]] == [
        ("operator", "resolve", "voided by hand in the legacy console", "resolved"),
        ("operator", "resolve", "double click", "already resolved"),
    ]
    assert server.all_operations(status="needs_operator") == []


def test_openapi_documents_the_admin_api(server: Any) -> None:
    spec = server.ok(server.get("/openapi.json", token=None))
    paths = spec["paths"]
    for path in (
        "/admin/operations",
        "/admin/operations/{operation_id}",
        "/admin/imports",
        "/admin/imports/{import_id}",
        "/admin/operations/{operation_id}/reconcile",
        "/admin/operations/{operation_id}/compensate",
        "/admin/operations/{operation_id}/resolve",
        "/readyz",
        "/metrics",
    ):
        assert path in paths, path
    listing = paths["/admin/operations"]["get"]
    assert listing["summary"] == "List operations"
    assert {"400", "401", "404", "503"} <= set(listing["responses"])
    assert {p["name"] for p in listing["parameters"]} == {
        "status",
        "kind",
        "principal",
        "tenant",
        "idempotency_key",
        "import_id",
        "since",
        "until",
        "limit",
        "cursor",
    }
    resolve = paths["/admin/operations/{operation_id}/resolve"]["post"]
    assert resolve["requestBody"]["required"] is True
    assert {"400", "401", "403", "404", "409", "503"} <= set(resolve["responses"])
    assert "requestBody" in paths["/admin/operations/{operation_id}/reconcile"]["post"]
    assert not paths["/admin/operations/{operation_id}/reconcile"]["post"]["requestBody"].get("required")


def test_nul_characters_are_refused_before_they_reach_the_database(server: Any, bob: Principal) -> None:
    """PostgreSQL text cannot hold NUL: found by schemathesis as a 500 on resolve's reason."""
    _, commit = server.committed(bob)
    for action in ("reconcile", "compensate", "resolve"):
        refused = server.post(f"{OPS}/{commit.operation_id}/{action}", {"reason": "a\x00b"})
        assert refused.status_code == 422, refused.text
    assert server.get(OPS, principal="a\x00b").status_code == 422
    assert server.get(f"{OPS}/a%00b").status_code == 422
    assert server.detail(commit.operation_id)["audit"] == []
