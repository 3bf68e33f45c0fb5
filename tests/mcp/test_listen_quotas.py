"""Listen streams per principal and URIs per listen request, over real HTTP with the SDK client."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

QUOTA_EXCEEDED = -32029


@pytest.mark.parametrize("settings_overrides", [{"max_listens_per_principal": 2}])
async def test_listen_streams_per_principal(server: Any) -> None:
    async with server.client() as alice, server.client(server.bob_token) as bob:
        handle = server.structured(await alice.call_tool("begin_import", {"target": "a"}))["handle"]
        uri = f"import://{handle}"
        async with alice.listen(resource_subscriptions=[uri]), alice.listen(resource_subscriptions=[uri]):
            with pytest.raises(MCPError) as refused:
                async with alice.listen(resource_subscriptions=[uri]):
                    pass
            assert refused.value.code == QUOTA_EXCEEDED
            assert "ADAPTER_MAX_LISTENS_PER_PRINCIPAL=2" in refused.value.message
            # Another principal is not locked out, and alice's open streams still deliver.
            async with bob.listen(resources_list_changed=True) as bob_sub:
                assert bob_sub.honored.resources_list_changed
        # Closed streams give their slots back.
        with anyio.fail_after(10):
            while True:
                try:
                    async with alice.listen(resource_subscriptions=[uri]) as again:
                        assert again.honored.resource_subscriptions == [uri]
                    break
                except MCPError:  # the server may not have seen the close yet
                    await anyio.sleep(0.1)


@pytest.mark.parametrize("settings_overrides", [{"max_uris_per_listen": 3}])
async def test_uris_per_listen(server: Any) -> None:
    async with server.client() as alice:
        uris = [f"import://imp_{'x' * 30}{i}" for i in range(4)]
        with pytest.raises(MCPError) as refused:
            async with alice.listen(resource_subscriptions=uris):
                pass
        assert refused.value.code == QUOTA_EXCEEDED
        assert "ADAPTER_MAX_URIS_PER_LISTEN=3" in refused.value.message
        async with alice.listen(resource_subscriptions=uris[:3]) as ok:
            assert ok.honored.resource_subscriptions is None  # none of them is alice's
