"""Done when: ``python -m adapter serve`` with ADAPTER_LEGACY_PORT naming a port module that lives
outside the adapter package, driven over MCP with the SDK client (begin, add with a record that breaks
its target's schema, commit, get_operation_status), the records landing in the wrapped database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from sqlalchemy import create_engine, text

from tests.support.servers import free_port, stop_process

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PORT_MODULE = '''
"""The wrapped system of this test: a shop database, reached through the kit's SQL port."""
import os

from adapter.legacy.sql import SqlPort

FACTORY_CALLS = []


def make_port(settings):
    FACTORY_CALLS.append(settings.server_name)
    descriptions = {"customers": "Shop customers."}
    return SqlPort(os.environ["SHOP_DB_URL"], tables=["customers"], descriptions=descriptions)
'''


@pytest.fixture
def shop(tmp_path: Path) -> dict[str, str]:
    """A folder with the user's port module and its database; the environment that serves it."""
    (tmp_path / "shop_port.py").write_text(textwrap.dedent(PORT_MODULE))
    shop_db = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = create_engine(shop_db)
    with engine.begin() as conn:
        conn.execute(
            text("CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(50) NOT NULL, email TEXT)")
        )
    engine.dispose()
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")},
        "SHOP_DB_URL": shop_db,
        "ADAPTER_LEGACY_PORT": "shop_port:make_port",
        "ADAPTER_DATABASE_URL": f"sqlite:///{tmp_path / 'adapter.db'}",
        "ADAPTER_SECRET": "s" * 40,
        "ADAPTER_TOOL_PREFIX": "shop_",
        "ADAPTER_SERVER_NAME": "shop-import",
    }


@pytest.fixture
def served(shop: dict[str, str], tmp_path: Path) -> Iterator[str]:
    migrate = subprocess.run(
        [sys.executable, "-m", "adapter", "migrate"], cwd=tmp_path, env=shop, capture_output=True, timeout=120
    )
    assert migrate.returncode == 0, migrate.stderr
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "adapter", "serve", "--port", str(port)],
        cwd=tmp_path,  # the port module is found in the folder the command runs in
        env=shop,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        yield base
    finally:
        stop_process(process, 30)


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return dict(result.structured_content)


async def test_a_port_outside_the_kit_is_served_over_mcp(served: str, shop: dict[str, str]) -> None:
    assert httpx.get(served + "/readyz", timeout=10).json()["status"] == "ready"  # asks the user's port
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=60.0)) as http,
        Client(streamable_http_client(served + "/mcp", http_client=http), cache=None) as client,
    ):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) >= {"shop_begin_import", "shop_add_records", "shop_commit_import"}
        begin_tool = tools["shop_begin_import"]
        assert "customers: Shop customers." in (begin_tool.description or "")
        assert begin_tool.input_schema["properties"]["target"]["enum"] == ["customers"]
        catalog = await client.read_resource("targets://customers")
        schema = json.loads(catalog.contents[0].text)["schema"]  # type: ignore[union-attr]
        assert schema["required"] == ["name"]

        unknown = await client.call_tool("shop_begin_import", {"target": "suppliers"})
        assert unknown.is_error and unknown.content[0].text.startswith("unknown_target:")  # type: ignore[union-attr]
        begun = _structured(await client.call_tool("shop_begin_import", {"target": "customers"}))
        handle = begun["handle"]
        bad = await client.call_tool(
            "shop_add_records",
            {"handle": handle, "records": [{"name": "Ada"}, {"name": "Grace", "email": 42}]},
        )
        assert bad.is_error
        assert bad.content[0].text == (  # type: ignore[union-attr]
            "validation_error: record 1: field 'email' must be of type string/null"
        )
        added = _structured(
            await client.call_tool(
                "shop_add_records", {"handle": handle, "records": [{"name": "Ada"}, {"name": "Grace"}]}
            )
        )
        assert added["record_count"] == 2  # the refused call staged nothing
        committed = _structured(await client.call_tool("shop_commit_import", {"handle": handle}))
        assert committed["status"] == "committed"
        assert committed["legacy_batch_id"].startswith("sql-")
        operation = _structured(
            await client.call_tool("shop_get_operation_status", {"operation_id": committed["operation_id"]})
        )
        assert operation["status"] == "succeeded"
        assert operation["result"]["legacy_batch_id"] == committed["legacy_batch_id"]
        with pytest.raises(MCPError):
            await client.read_resource("targets://suppliers")
    engine = create_engine(shop["SHOP_DB_URL"])
    with engine.connect() as conn:
        names = conn.execute(text("SELECT name FROM customers ORDER BY id")).scalars().all()
    engine.dispose()
    assert names == ["Ada", "Grace"]
