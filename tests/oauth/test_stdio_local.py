"""stdio keeps its one local principal in resource-server mode: the host that started the process is
the caller, there is no bearer token on stdio, and the identity provider is never asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.services.admin.reads import ImportFilter
from adapter.store import Store
from adapter.store.migrate import upgrade
from tests.support.constants import SECRET
from tests.support.kit import kit_settings, running_kit
from tests.support.servers import free_port, stdio_client

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # a Python subprocess


async def test_stdio_ignores_the_identity_provider_and_runs_as_the_local_principal(
    tmp_path: Path, legacy_address: tuple[str, int]
) -> None:
    db_url = f"sqlite:///{tmp_path / 'adapter.db'}"
    upgrade(db_url)
    host, port = legacy_address
    nowhere = f"http://127.0.0.1:{free_port()}"  # no provider listens there: it must not be needed
    env = {
        "ADAPTER_DATABASE_URL": db_url,
        "ADAPTER_LEGACY_URL": f"tcp://{host}:{port}",
        "ADAPTER_SECRET": SECRET,
        "ADAPTER_SECRET_FILE": str(tmp_path / "unused.secret"),
        "ADAPTER_OAUTH_ISSUER": nowhere,
        "ADAPTER_OAUTH_AUDIENCE": "http://127.0.0.1:9/mcp",
    }
    async with stdio_client(env, tmp_path) as client:
        result = await client.call_tool("begin_import", {"target": "customers"})
        assert not result.is_error, result.content
    settings = kit_settings(db_url, legacy_address, tmp_path, tokens=None)
    store = Store.from_url(db_url)
    try:
        with running_kit(settings, store) as kit:
            [stored] = kit.admin.list_imports(ImportFilter()).items
    finally:
        store.dispose()
    assert (stored.principal, stored.tenant) == ("local", "local")
