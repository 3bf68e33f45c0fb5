"""The TypeScript SDK's OAuth client (1.x and the v2 client), each with its client-credentials
provider, against the server and the real provider (``tests/node/oauth_flow.mjs``): discovery from
the 401, a token for this server (RFC 8707 ``resource``), an import committed.

Both are configured with the MCP scopes. The 1.x client-credentials provider asks for exactly those
(its token request does not take a challenge's ``scope``), so it sees one 401 and no 403. The v2
client asks for what the 401 names (reading) and steps up on each 403 to the scopes that 403 names,
replacing its own: the 403 names the missing scope together with those already granted, so it keeps
reading while it gains staging and then committing."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import anyio.to_thread
import pytest

from adapter.services.admin.reads import ImportFilter
from tests.oauth.conftest import OAuthServer
from tests.support.idp import (
    ABORT,
    COMMIT,
    MCP_SCOPES,
    NODE,
    NODE_DIR,
    READ,
    SECRET,
    WRITE,
    Provider,
    needs_idp,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow, needs_idp]  # Node subprocesses


def run_flow(sdk: str, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [str(NODE), str(NODE_DIR / "oauth_flow.mjs"), "--sdk", sdk],
        cwd=NODE_DIR,
        env={**os.environ, **env},
        capture_output=True,
        timeout=120,
        check=False,
    )
    lines = done.stdout.decode().strip().splitlines()
    assert lines, done.stderr.decode()[-2000:]
    out: dict[str, Any] = json.loads(lines[-1])
    assert "fatal" not in out, (out["fatal"], out["seen"])
    return out


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_the_typescript_sdk_discovers_the_provider_and_commits(
    server: OAuthServer, idp: Provider, legacy_engine: Any, sdk: str
) -> None:
    env = {
        "MCP_URL": server.url,
        "ISSUER": idp.issuer,
        "CLIENT_ID": "agent",
        "CLIENT_SECRET": SECRET,
        "SCOPE": MCP_SCOPES,
    }
    out = await anyio.to_thread.run_sync(run_flow, sdk, env)

    assert out["committed"] == "committed" and out["status"] == "committed", out
    assert "commit_import" in out["tools"]
    assert len(legacy_engine.committed_batches()) == 1
    seen = [tuple(step) for step in out["seen"]]
    assert seen[0] == ("/mcp", 401), seen
    assert ("/.well-known/oauth-protected-resource/mcp", 200) in seen, seen
    assert ("/token", 200) in seen, seen
    refusals = [status for path, status in seen[1:] if path == "/mcp" and status >= 400]
    if sdk == "v1":
        assert refusals == [], json.dumps(seen)
        assert set(out["scope"].split()) == {READ, WRITE, COMMIT, ABORT}, out["scope"]
    else:
        assert refusals == [403, 403], json.dumps(seen)  # begin_import (write), commit_import (commit)
        assert [path for path, _ in seen].count("/token") == 3, json.dumps(seen)
        assert set(out["scope"].split()) == {READ, WRITE, COMMIT}, out["scope"]
    [stored] = server.kit.admin.list_imports(ImportFilter()).items
    assert (stored.principal, stored.tenant) == ("agent", "acme")
