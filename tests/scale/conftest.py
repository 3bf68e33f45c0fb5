"""Harness for scale-out tests: real server processes on one PostgreSQL schema, one simulator over TCP.

* ``cluster``: a :class:`Cluster` for the module: a fresh schema (migrated once, as an operator
  would), the simulator served over TCP from this process, a token file of three principals, and two
  server processes ``a`` and ``b`` (``python -m adapter serve`` each on its own port), as two hosts
  behind a proxy would be. ``cluster.start()`` starts another one (for the SIGKILL test).
* Workers run with short leases and a fast maintenance loop so a takeover is quick to observe.

Tests import nothing from here (pytest's importlib mode): helpers are methods of the fixtures.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from sqlalchemy import create_engine, text

from adapter.store.migrate import upgrade
from legacy_sim.engine import LegacyEngine
from legacy_sim.server import start_server
from tests.support.mcp import mcp_headers, modern_meta, parse_body
from tests.support.postgres import postgres_schema, schema_url
from tests.support.servers import free_port, stop_process

POSTGRES_URL = os.environ.get("ADAPTER_TEST_POSTGRES_URL")
SECRET = "scale-secret-" + secrets.token_hex(24)
TOKENS = {name: f"{name}-token-{secrets.token_hex(12)}" for name in ("alice", "bob", "carol")}
PROTOCOL_VERSION = "2026-07-28"
TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Worker:
    """One server process."""

    name: str
    process: subprocess.Popen[bytes]
    base_url: str
    log: Path

    @property
    def url(self) -> str:
        return self.base_url + "/mcp"

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        stop_process(self.process, 15)

    @contextlib.asynccontextmanager
    async def client(self, who: str = "alice", *, elicitation_callback: Any = None) -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {TOKENS[who]}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT)) as http:
            transport = streamable_http_client(self.url, http_client=http)
            async with Client(
                transport, elicitation_callback=elicitation_callback, cache=None, read_timeout_seconds=TIMEOUT
            ) as client:
                yield client

    async def raw_call(self, http: httpx.AsyncClient, tool: str, arguments: dict[str, Any]) -> Any:
        """One tools/call as plain JSON-RPC over HTTP (cheap enough for 100 at once)."""
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": modern_meta()},
        }
        headers = mcp_headers("tools/call", tool, token=TOKENS["alice"])
        return parse_body(await http.post(self.url, json=message, headers=headers, timeout=TIMEOUT))


@dataclass
class Cluster:
    database_url: str
    legacy: LegacyEngine
    legacy_url: str
    tmp: Path
    workers: list[Worker] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)  # ADAPTER_* over the ones below

    @property
    def a(self) -> Worker:
        return self.workers[0]

    @property
    def b(self) -> Worker:
        return self.workers[1]

    def env(self) -> dict[str, str]:
        tokens = self.tmp / "tokens.json"
        if not tokens.exists():
            tokens.write_text(
                json.dumps({token: {"principal": who, "tenant": "acme"} for who, token in TOKENS.items()})
            )
        env = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}
        env.update(
            {
                "ADAPTER_DATABASE_URL": self.database_url,
                "ADAPTER_LEGACY_URL": self.legacy_url,
                "ADAPTER_SECRET": SECRET,
                "ADAPTER_TOKENS": str(tokens),
                "ADAPTER_PAGE_SIZE": "3",
                "ADAPTER_LEASE_SECONDS": "2",
                "ADAPTER_RECONCILE_INTERVAL_SECONDS": "0.5",
                "ADAPTER_UNKNOWN_GRACE_SECONDS": "6",  # above the legacy timeout (a start-up rule)
                "ADAPTER_COMMIT_CHUNK_SIZE": "50",
                "ADAPTER_LEGACY_TIMEOUT_SECONDS": "5",
                "ADAPTER_DB_POOL_SIZE": "20",
                "ADAPTER_MAX_COMMITS_PER_TENANT": "200",  # these tests prove idempotency, not the quota
                "ADAPTER_DB_MAX_OVERFLOW": "40",
                "ADAPTER_DB_POOL_TIMEOUT_SECONDS": "60",
                **self.settings,
            }
        )
        return env

    def start(self, name: str) -> Worker:
        port = free_port()
        log = self.tmp / f"{name}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "adapter", "serve", "--port", str(port)],
            cwd=self.tmp,
            env=self.env(),
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        worker = Worker(name, process, f"http://127.0.0.1:{port}", log)
        self.workers.append(worker)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"worker {name} exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(worker.base_url + "/healthz", timeout=1).status_code == 200:
                    return worker
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"worker {name} did not start: {log.read_text()[-2000:]}")

    def batches(self, tag: str) -> list[dict[str, Any]]:
        """The legacy batches whose records carry ``tag``."""
        return [
            b for b in self.legacy.committed_batches() if b["records"] and b["records"][0].get("tag") == tag
        ]

    def sql(self, statement: str, **params: Any) -> list[Any]:
        engine = create_engine(self.database_url)
        try:
            with engine.connect() as conn:
                return list(conn.execute(text(statement), params))
        finally:
            engine.dispose()

    @staticmethod
    def structured(result: CallToolResult) -> dict[str, Any]:
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        return result.structured_content


@pytest.fixture(scope="module")
def postgres_schema_url() -> Iterator[str]:
    with postgres_schema("t") as (_, schema):  # skips where PostgreSQL is not configured
        yield schema_url(schema)


@pytest.fixture(scope="module")
def cluster_settings() -> dict[str, str]:
    """``ADAPTER_*`` settings a test module gives its workers beside the cluster's (override it)."""
    return {}


@pytest.fixture(scope="module")
def cluster(
    postgres_schema_url: str, tmp_path_factory: pytest.TempPathFactory, cluster_settings: dict[str, str]
) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("cluster")
    upgrade(postgres_schema_url)  # once, by the operator: the workers never migrate
    legacy = LegacyEngine(tmp / "legacy.db", idle_timeout=None)
    server = start_server(legacy, "127.0.0.1", 0)
    host, port = server.address
    cluster = Cluster(postgres_schema_url, legacy, f"tcp://{host}:{port}", tmp, settings=cluster_settings)
    try:
        cluster.start("a")
        cluster.start("b")
        yield cluster
    finally:
        for worker in cluster.workers:
            worker.stop()
        server.close()
        legacy.close()
