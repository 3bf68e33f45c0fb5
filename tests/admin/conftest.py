"""Harness for the admin side over real HTTP: the kit on a real database, the simulator over TCP.

* ``settings_overrides``: ``load_settings`` overrides; override with
  ``@pytest.mark.parametrize("settings_overrides", [{...}])`` (e.g. no admin tokens).
* ``kit``: ``adapter.bootstrap.build`` on the migrated ``store`` (SQLite and PostgreSQL) with an
  operator token, a viewer token, a token file with one MCP principal (alice@acme), the simulator
  over TCP and fast legacy retries.
* ``server``: ``create_app(kit, run_maintenance=False)`` (so only the tests reconcile) served by
  uvicorn on 127.0.0.1:0 in a thread of this process; a :class:`Running` with ``url``, ``kit``,
  ``get``/``post`` (httpx, operator token unless told), ``tool`` (one MCP tool call) and helpers
  that make operations through the ImportService.

Tests import nothing from here (pytest's importlib mode): everything is reached through fixtures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from adapter.bootstrap import Kit, build
from adapter.config import load_settings
from adapter.domain.identity import Principal
from adapter.entrypoints.http.app import create_app
from adapter.store import Store
from legacy_sim.engine import LegacyEngine

SECRET = "admin-test-secret-" + secrets.token_hex(24)
OPERATOR_TOKEN = "operator-" + secrets.token_hex(16)
VIEWER_TOKEN = "viewer-" + secrets.token_hex(16)
ALICE_MCP_TOKEN = "alice-mcp-" + secrets.token_hex(12)
PROTOCOL_VERSION = "2026-07-28"
TIMEOUT = 30.0


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {}


@pytest.fixture
def kit(
    store: Store,
    db_url: str,
    legacy_address: tuple[str, int],
    settings_overrides: dict[str, Any],
    tmp_path: Path,
) -> Iterator[Kit]:
    host, port = legacy_address
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({ALICE_MCP_TOKEN: {"principal": "alice", "tenant": "acme"}}))
    values: dict[str, Any] = {
        "database_url": db_url,
        "legacy_url": f"tcp://{host}:{port}",
        "secret": SECRET,
        "secret_file": str(tmp_path / "unused.secret"),
        "tokens": str(tokens),
        "admin_token": OPERATOR_TOKEN,
        "admin_readonly_token": VIEWER_TOKEN,
        "legacy_timeout_seconds": 5.0,
        "unknown_grace_seconds": 0.0,
    }
    values.update(settings_overrides)
    kit = build(load_settings(**values), store=store)
    ctx = kit.service.ctx
    ctx.commit_policy = dataclasses.replace(ctx.commit_policy, retry_wait_initial=0.001, retry_wait_max=0.01)
    yield kit
    kit.close()


@contextlib.contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """uvicorn on 127.0.0.1:0 in a thread of its own (so tests may block); yields the base URL."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="admin-test-uvicorn", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn stopped before it started")
            if time.monotonic() > deadline:
                raise TimeoutError("uvicorn did not start in 10 s")
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


@dataclass
class Running:
    """One running app: its URL, its kit, an HTTP client, and ways to make operations."""

    url: str
    kit: Kit
    http: httpx.Client

    operator_token = OPERATOR_TOKEN
    viewer_token = VIEWER_TOKEN
    mcp_token = ALICE_MCP_TOKEN

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
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": name,
                "arguments": arguments,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
            **self.auth(self.mcp_token),
        }
        response = self.http.post(self.url + "/mcp", json=message, headers=headers)
        if response.status_code != 200:  # a JSON-RPC error answered with an HTTP error status
            return response.json()  # type: ignore[no-any-return]
        final = None
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for line in response.text.splitlines():
                if line.startswith("data:"):
                    data = json.loads(line[5:].strip())
                    if "id" in data:
                        final = data
        else:
            final = response.json()
        assert final is not None, response.text
        return final.get("result", final)  # type: ignore[no-any-return]

    # --- making operations through the service layer -----------------------------------------------

    def staged(self, who: Principal, n: int = 3, *, target: str = "customers", key: str | None = None) -> str:
        handle = self.kit.service.begin(who, target, idempotency_key=key).handle
        self.kit.service.add(who, handle, [{"n": i} for i in range(n)])
        return handle

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
def app_server() -> Any:
    """``serve_in_thread`` for tests that build their own app."""
    return serve_in_thread


@pytest.fixture
def server(kit: Kit) -> Iterator[Running]:
    with (
        serve_in_thread(create_app(kit, run_maintenance=False)) as url,
        httpx.Client(timeout=TIMEOUT) as http,
    ):
        yield Running(url, kit, http)


@pytest.fixture(name="serve_in_thread")
def serve_in_thread_fixture() -> Any:
    """The ``serve_in_thread(app)`` context manager, for tests that build an app of their own."""
    return serve_in_thread


@pytest.fixture
def carol() -> Principal:
    return Principal(subject="carol", tenant="globex")
