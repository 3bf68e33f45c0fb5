"""Harness for the admin side over real HTTP: the kit on a real database, the simulator over TCP.

* ``settings_overrides``: ``load_settings`` overrides; override with
  ``@pytest.mark.parametrize("settings_overrides", [{...}])`` (e.g. no admin tokens).
* ``kit`` (the root conftest's): the shared kit factory on the migrated ``store`` (SQLite and
  PostgreSQL) with, from ``kit_defaults`` here, an operator token and a viewer token.
* ``server``: ``create_app(kit, run_maintenance=False)`` (so only the tests reconcile) served by
  uvicorn on 127.0.0.1:0 in a thread of this process; a :class:`Running` with ``url``, ``kit``,
  ``get``/``post`` (httpx, operator token unless told), ``tool`` (one MCP tool call) and helpers
  that make operations through the ImportService.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from adapter.bootstrap import Kit
from adapter.domain.identity import Principal
from adapter.entrypoints.http.app import create_app
from legacy_sim.engine import LegacyEngine
from tests.support.constants import ALICE_TOKEN, CAROL, OPERATOR_TOKEN, TIMEOUT, VIEWER_TOKEN
from tests.support.imports import staged
from tests.support.mcp import mcp_headers, modern_meta, parse_body
from tests.support.servers import serve_in_thread


@pytest.fixture
def kit_defaults() -> dict[str, Any]:
    return {
        "admin_token": OPERATOR_TOKEN,
        "admin_readonly_token": VIEWER_TOKEN,
        "legacy_timeout_seconds": 5.0,
        "unknown_grace_seconds": 0.0,
    }


@dataclass
class Running:
    """One running app: its URL, its kit, an HTTP client, and ways to make operations."""

    url: str
    kit: Kit
    http: httpx.Client

    operator_token = OPERATOR_TOKEN
    viewer_token = VIEWER_TOKEN
    mcp_token = ALICE_TOKEN

    @staticmethod
    def auth(token: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"} if token else {}

    def get(self, path: str, *, token: str | None = OPERATOR_TOKEN, **params: Any) -> httpx.Response:
        params = {k: v for k, v in params.items() if v is not None}
        return self.http.get(self.url + path, params=params, headers=self.auth(token))

    def post(self, path: str, body: Any = None, *, token: str | None = OPERATOR_TOKEN) -> httpx.Response:
        return self.http.post(self.url + path, json=body, headers=self.auth(token))

    def ok(self, response: httpx.Response) -> Any:
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def detail(self, operation_id: str) -> dict[str, Any]:
        return self.ok(self.get(f"/admin/operations/{operation_id}"))

    def all_operations(self, **filters: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.ok(self.get("/admin/operations", limit=200, cursor=cursor, **filters))
            items += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return items

    # --- MCP ----------------------------------------------------------------------------------

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One ``tools/call`` over Streamable HTTP (2026-07-28 headers): the JSON-RPC result, or the
        whole JSON-RPC error message."""
        params = {"name": name, "arguments": arguments, "_meta": modern_meta()}
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        headers = mcp_headers("tools/call", name, token=self.mcp_token)
        response = self.http.post(self.url + "/mcp", json=message, headers=headers)
        answer = parse_body(response)
        if response.status_code != 200:  # a JSON-RPC error answered with an HTTP error status
            return answer  # type: ignore[no-any-return]
        assert answer is not None, response.text
        return answer.get("result", answer)  # type: ignore[no-any-return]

    # --- making operations through the service layer -----------------------------------------------

    def staged(self, who: Principal, n: int = 3, *, target: str = "customers", key: str | None = None) -> str:
        return staged(self.kit.service, who, n, target=target, key=key)

    def committed(self, who: Principal, n: int = 3, *, target: str = "customers") -> tuple[str, Any]:
        """(handle, CommitResult) of a committed import."""
        handle = self.staged(who, n, target=target)
        result = self.kit.service.commit(who, handle)
        assert result.status == "committed", result
        return handle, result

    def outcome_unknown(self, who: Principal, engine: LegacyEngine, *, key: str | None = None) -> Any:
        """A commit that landed but whose reply was lost: the operation is outcome_unknown."""
        handle = self.staged(who, 2)
        engine.update_faults(drop_after_commit=1.0)
        try:
            result = self.kit.service.commit(who, handle, idempotency_key=key)
        finally:
            engine.update_faults(drop_after_commit=0.0)
        assert result.status == "outcome_unknown", result
        return result

    def needs_operator(self, who: Principal, engine: LegacyEngine) -> tuple[str, str]:
        """(commit operation id, compensate operation id) with the compensation at needs_operator."""
        _, committed = self.committed(who, 2)
        engine.update_faults(error_rate=1.0)
        try:
            acted = self.ok(self.post(f"/admin/operations/{committed.operation_id}/compensate"))
        finally:
            engine.update_faults(error_rate=0.0)
        assert acted["outcome"] == "import compensating", acted
        import_id = self.detail(committed.operation_id)["operation"]["import_id"]
        [compensation] = self.all_operations(kind="compensate", import_id=import_id)
        assert compensation["status"] == "needs_operator", compensation
        return committed.operation_id, compensation["operation_id"]


@pytest.fixture
def server(kit: Kit) -> Iterator[Running]:
    with (
        serve_in_thread(create_app(kit, run_maintenance=False)) as url,
        httpx.Client(timeout=TIMEOUT) as http,
    ):
        yield Running(url, kit, http)


@pytest.fixture
def carol() -> Principal:
    return CAROL
