"""2025-era sessions per principal, over real HTTP (``http/answers.py``, ``http/callers.py``).

One token used to be able to open every session the SDK allows a process (``max_sessions``), and
then every other tenant's ``initialize`` got 503 for up to half an hour. Each principal now holds at
most ``ADAPTER_MAX_LEGACY_SESSIONS_PER_PRINCIPAL`` (below the process's ``ADAPTER_LEGACY_MAX_SESSIONS``,
which the settings check): one more ``initialize`` is 429 with a JSON-RPC error naming the setting,
another principal still gets its sessions, and a session that ends (DELETE, idle) gives its slot back.
Raw JSON-RPC over httpx, so the tests see each status code.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from adapter.config import ConfigError, load_settings
from tests.support.wait import poll_until

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
CAPS = {"max_legacy_sessions_per_principal": 3, "legacy_max_sessions": 5}


def headers(token: str) -> dict[str, str]:
    return {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }


async def initialize(http: httpx.AsyncClient, running: Any, token: str) -> httpx.Response:
    return await http.post(running.url, json=INITIALIZE, headers=headers(token))


@pytest.mark.parametrize("settings_overrides", [CAPS])
async def test_one_principal_at_its_cap_never_blocks_another(server: Any) -> None:
    async with httpx.AsyncClient(timeout=30.0) as http:
        alice = [await initialize(http, server, server.alice_token) for _ in range(3)]
        assert [r.status_code for r in alice] == [200, 200, 200]
        refused = await initialize(http, server, server.alice_token)
        # Bob (another principal) opens the rest of what the process allows.
        bob = [await initialize(http, server, server.bob_token) for _ in range(2)]
        # Alice's open sessions still work.
        session = {
            **headers(server.alice_token),
            "Mcp-Session-Id": alice[0].headers["mcp-session-id"],
            "MCP-Protocol-Version": LEGACY,
        }
        listed = await http.post(
            server.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session
        )
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == -32029 and error["data"]["code"] == "quota_exceeded"
    assert "ADAPTER_MAX_LEGACY_SESSIONS_PER_PRINCIPAL=3" in error["message"]
    assert "mcp-session-id" not in refused.headers
    assert [r.status_code for r in bob] == [200, 200]
    assert listed.status_code == 200 and listed.json()["result"]["tools"]


@pytest.mark.parametrize("settings_overrides", [CAPS])
async def test_a_session_the_client_ends_gives_its_slot_back(server: Any) -> None:
    async with httpx.AsyncClient(timeout=30.0) as http:
        opened = [await initialize(http, server, server.alice_token) for _ in range(3)]
        assert (await initialize(http, server, server.alice_token)).status_code == 429
        ended = await http.delete(
            server.url,
            headers={
                **headers(server.alice_token),
                "Mcp-Session-Id": opened[0].headers["mcp-session-id"],
                "MCP-Protocol-Version": LEGACY,
            },
        )
        assert ended.status_code == 200
        assert (await initialize(http, server, server.alice_token)).status_code == 200


@pytest.mark.parametrize("settings_overrides", [{**CAPS, "legacy_session_idle_seconds": 2.5}])
async def test_idle_sessions_expire_and_give_their_slots_back(server: Any) -> None:
    async with httpx.AsyncClient(timeout=30.0) as http:
        for _ in range(3):
            assert (await initialize(http, server, server.alice_token)).status_code == 200
        statuses: list[int] = []

        async def opens_again() -> bool:
            statuses.append((await initialize(http, server, server.alice_token)).status_code)
            return statuses[-1] == 200

        await poll_until(opens_again, bool, 10.0, what="a slot of an idle session")
    assert statuses[0] == 429  # at first all three were still open


@pytest.mark.parametrize("settings_overrides", [CAPS])
async def test_a_failed_opening_request_holds_no_slot(server: Any) -> None:
    """Without a session id only ``initialize`` can open one; anything else is refused by the SDK
    and the session it started is dropped at once, with its slot."""
    async with httpx.AsyncClient(timeout=30.0) as http:
        for _ in range(5):
            wrong = await http.post(
                server.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers=headers(server.alice_token),
            )
            assert 400 <= wrong.status_code < 429
        opened = [await initialize(http, server, server.alice_token) for _ in range(3)]
    assert [r.status_code for r in opened] == [200, 200, 200]


@pytest.mark.parametrize("settings_overrides", [{"tokens": None, **CAPS}])
async def test_local_mode_counts_its_one_principal(server: Any) -> None:
    async with httpx.AsyncClient(timeout=30.0) as http:
        plain = {k: v for k, v in headers("x").items() if k != "Authorization"}
        statuses = [
            (await http.post(server.url, json=INITIALIZE, headers=plain)).status_code for _ in range(4)
        ]
    assert statuses == [200, 200, 200, 429]


def test_one_principal_may_not_hold_every_session_of_the_process() -> None:
    with pytest.raises(ConfigError, match="ADAPTER_MAX_LEGACY_SESSIONS_PER_PRINCIPAL must be below"):
        load_settings(max_legacy_sessions_per_principal=100, legacy_max_sessions=100)
    assert load_settings().legacy_session_idle_seconds <= 600  # idle sessions go in minutes
