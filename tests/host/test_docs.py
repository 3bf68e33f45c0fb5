"""docs/host-kit.md's example runs as printed, against two instances of our server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from adapter.host import CallState

pytestmark = pytest.mark.anyio

DOC = Path(__file__).resolve().parents[2] / "docs" / "host-kit.md"


def example() -> tuple[str, dict[str, Any]]:
    [code] = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    namespace: dict[str, Any] = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    return code, namespace


def test_the_example_wires_two_servers_in_under_40_lines() -> None:
    code, namespace = example()
    assert len(code.strip().splitlines()) < 40
    assert callable(namespace["commit_on_both"])


async def test_the_example_commits_on_both_servers(our_servers: dict[str, Any]) -> None:
    _, namespace = example()
    tokens = {name: server.credentials for name, server in our_servers.items()}
    urls = {name: server.url for name, server in our_servers.items()}
    calls = await namespace["commit_on_both"](urls, tokens)
    assert [(c.qualified, c.state) for c in calls] == [
        ("eu.commit_import", CallState.COMPLETED),
        ("us.commit_import", CallState.COMPLETED),
    ]


async def test_the_example_resolves_lost_commits_through_the_status_tool(
    our_servers: dict[str, Any], legacy_address: tuple[str, int]
) -> None:
    from legacy_sim.client import LegacyClient

    _, namespace = example()
    tokens = {name: server.credentials for name, server in our_servers.items()}
    urls = {name: server.url for name, server in our_servers.items()}
    legacy = LegacyClient(*legacy_address, timeout=5.0)
    legacy.faults(drop_after_commit=1.0)
    try:
        calls = await namespace["commit_on_both"](urls, tokens)
    finally:
        legacy.faults(drop_after_commit=0.0)
        legacy.close()
    for call in calls:
        assert CallState.FAILED not in call.states
        assert call.state in (CallState.OUTCOME_UNKNOWN, CallState.COMPLETED)
        assert any(why.startswith("status tool:") for _, _, why in call.history)
