"""What docs/operations.md promises about limits and metadata, checked against the running code."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp.server.mcpserver import RequestStateBoundary

from adapter.config import ConfigError, load_settings
from adapter.entrypoints.mcp.server import McpGateway

pytestmark = pytest.mark.anyio


async def test_no_oauth_metadata_names_an_authorization_server_that_does_not_exist(server: Any) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            assert (await http.get(server.base_url + path)).status_code == 404, path
    refused, _ = await server.raw("tools/list", {}, token=None)
    assert refused.status_code == 401
    assert "resource_metadata" not in refused.headers.get("www-authenticate", "")


@pytest.mark.parametrize("settings_overrides", [{"confirm_max_seconds": 1800}])
async def test_a_confirmation_lives_as_long_as_the_one_setting_says(server: Any) -> None:
    gateway = McpGateway(server.kit.service, server.kit.settings)
    [boundary] = [m for m in gateway.server.middleware if isinstance(m, RequestStateBoundary)]
    assert boundary._security.ttl == 1800  # the SDK's own default would be 600


def test_settings_bounds_are_the_documented_ones() -> None:
    with pytest.raises(ConfigError, match="ADAPTER_MAX_RECORDS_PER_CALL"):
        load_settings(max_records_per_call=1001)
    with pytest.raises(ConfigError, match="ADAPTER_CONFIRM_MAX_SECONDS"):
        load_settings(confirm_max_seconds=3601)


def test_every_setting_is_documented_with_its_default() -> None:
    """docs/operations.md names every setting, and every number it gives as a default is the code's."""
    import re
    from pathlib import Path

    from adapter.config import Settings

    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    fields = Settings.model_fields
    missing = [name for name in fields if f"ADAPTER_{name.upper()}" not in text]
    assert missing == []
    rows = re.findall(r"^\| `ADAPTER_([A-Z0-9_]+)` \| `([0-9.]+)`", text, flags=re.MULTILINE)
    assert len(rows) > 40
    for name, documented in rows:
        default = fields[name.lower()].default
        assert float(documented) == float(default), (name, documented, default)
