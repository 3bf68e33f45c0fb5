"""How a wrapped system presents itself: name, title, instructions, tool prefix, targets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from adapter.legacy.simulator import SIMULATOR_TARGETS, SimulatorPort
from adapter.ports.legacy import TargetCatalog

pytestmark = pytest.mark.anyio

ERP = {
    "server_name": "acme-erp",
    "server_title": "Acme ERP imports",
    "server_instructions": "Use begin_import for Acme ERP; then commit_import.",
    "tool_prefix": "erp_",
}


@pytest.mark.parametrize("settings_overrides", [ERP])
async def test_name_title_instructions_and_prefixed_tools(server: Any) -> None:
    async with server.client() as client:
        discovered = await client.session.discover()
        info = client.server_info
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        begun = server.structured(await client.call_tool("erp_begin_import", {"target": "customers"}))
        with pytest.raises(MCPError):
            await client.call_tool("begin_import", {"target": "customers"})

    assert info.name == "acme-erp"
    assert info.title == "Acme ERP imports"
    assert discovered.instructions == "Use erp_begin_import for Acme ERP; then erp_commit_import."
    assert sorted(tools) == sorted(
        "erp_" + n
        for n in (
            "begin_import",
            "add_record",
            "add_records",
            "commit_import",
            "abort_import",
            "get_import_status",
            "get_operation_status",
            "replace_records",
        )
    )
    assert "erp_add_records" in (tools["erp_begin_import"].description or "")
    assert " add_records" not in (tools["erp_begin_import"].description or "")
    assert begun["status"] == "open"


async def test_defaults_and_the_simulators_permissive_targets(server: Any) -> None:
    async with server.client() as client:
        discovered = await client.session.discover()
        info = client.server_info
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        catalog = json.loads((await client.read_resource("targets://")).contents[0].text)
        one = json.loads((await client.read_resource("targets://anything")).contents[0].text)
        templates = (await client.list_resource_templates()).resource_templates

    assert info.name == "legacy-import-adapter"
    assert "targets://" in (discovered.instructions or "")
    begin = tools["begin_import"]
    assert "any other name" in (begin.description or "")
    assert "enum" not in begin.input_schema["properties"]["target"]  # the simulator accepts any name
    assert issubclass(SimulatorPort, TargetCatalog)  # the simulator declares its targets like any port
    declared = {
        "name": "*",
        "description": SIMULATOR_TARGETS[0].description,
        "schema": {"type": "object"},
        "max_records": None,
    }
    assert catalog == {"targets": [declared]}
    assert one == declared  # any name is the permissive target
    assert [t.uri_template for t in templates] == ["import://{handle}", "targets://{name}"]
