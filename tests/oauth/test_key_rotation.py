"""The provider rotates its signing keys while the server runs: tokens signed with the new key are
accepted without a restart (an unknown ``kid`` fetches the key set again), and a flood of made-up
``kid`` values cannot make the server hammer the provider (one fetch per interval at most)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest

from tests.oauth.conftest import OAuthServer
from tests.support.idp import Provider, SigningKey, claims_of, forge, needs_idp, running_provider
from tests.support.wait import wait_until_async

pytestmark = [pytest.mark.anyio, needs_idp]


@pytest.fixture
def idp(tmp_path: Path) -> Iterator[Provider]:
    """A provider of this test's own: it is restarted with other keys."""
    with running_provider(tmp_path) as provider:
        yield provider


async def accepted(server: OAuthServer, token: str) -> bool:
    response, _ = await server.call("begin_import", {"target": "customers"}, token=token)
    assert response.status_code in (200, 401), response.text
    return response.status_code == 200


@pytest.mark.parametrize("settings_overrides", [{"oauth_jwks_refetch_seconds": 1.0}])
async def test_new_keys_are_picked_up_without_a_restart(
    server: OAuthServer, idp: Provider, audience: str, settings_overrides: dict[str, Any]
) -> None:
    await wait_until_async(lambda: idp.jwks_fetches() == 1, what="the server's first key fetch")
    loaded_at = time.monotonic()
    old_key = idp.keys[0]
    before = idp.token("agent", audience)
    assert await accepted(server, before)

    new_key = SigningKey.new()
    idp.restart(keys=[new_key, old_key])  # signs with the new key, still publishes the old one
    after = idp.token("agent", audience)
    assert jwt.get_unverified_header(after)["kid"] == new_key.kid
    # the refetch interval since the server's last fetch has passed (a real rotation comes much later)
    await wait_until_async(lambda: time.monotonic() - loaded_at > 1.2, what="the refetch interval")
    assert await accepted(server, after), "a token signed with the new key works at once"
    assert idp.jwks_fetches() == 1, "the new key set was fetched once"
    assert await accepted(server, before), "tokens signed with the old key work while it is published"
    assert idp.jwks_fetches() == 1


async def test_unknown_key_ids_cost_at_most_one_fetch_per_interval(
    server: OAuthServer, idp: Provider, audience: str
) -> None:
    await wait_until_async(lambda: idp.jwks_fetches() == 1, what="the server's first key fetch")
    claims = claims_of(idp.token("agent", audience))
    forged = [forge(claims, key=SigningKey.new()) for _ in range(5)]  # each with a kid of its own
    results: list[bool] = []

    async def attempt(token: str) -> None:
        results.append(await accepted(server, token))

    async with anyio.create_task_group() as tasks:
        for token in forged * 4:
            tasks.start_soon(attempt, token)
    assert results == [False] * 20
    assert idp.jwks_fetches() == 1, (
        "within ADAPTER_OAUTH_JWKS_REFETCH_SECONDS (30 s) nothing is fetched again"
    )
