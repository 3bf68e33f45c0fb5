"""The dashboard's login throttle counts failures per client address; the address comes from
``X-Forwarded-For`` only when the peer is a configured proxy (``ADAPTER_TRUSTED_PROXIES``), as
``serve`` runs uvicorn (``http/connections.py``). Before, uvicorn believed the header from loopback,
so a client there (or anything behind a local proxy) could rotate it and never be throttled."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from adapter.bootstrap import Kit
from adapter.entrypoints.http.app import create_app
from adapter.entrypoints.http.connections import uvicorn_options
from tests.support.servers import serve_in_thread

UI = "/admin/ui"
THROTTLE = {"login_max_failures": 3, "login_failure_window_seconds": 60}


@pytest.fixture
def url(kit: Kit) -> Iterator[str]:
    with serve_in_thread(create_app(kit, run_maintenance=False), **uvicorn_options(kit.settings)) as base:
        yield base


def failed_logins(url: str, count: int) -> list[int]:
    """Wrong tokens, each claiming another client address."""
    with httpx.Client(timeout=30.0) as http:
        return [
            http.post(
                url + f"{UI}/login",
                data={"token": "w" * 40},
                headers={"Origin": url, "X-Forwarded-For": f"203.0.113.{n}"},
            ).status_code
            for n in range(count)
        ]


@pytest.mark.parametrize("settings_overrides", [THROTTLE])
def test_a_rotating_forwarded_for_does_not_escape_the_throttle(url: str) -> None:
    assert failed_logins(url, 5) == [401, 401, 401, 429, 429]


@pytest.mark.parametrize("settings_overrides", [{**THROTTLE, "trusted_proxies": ["127.0.0.1"]}])
def test_a_configured_proxy_is_believed(url: str) -> None:
    assert failed_logins(url, 5) == [401] * 5  # five different clients behind the proxy
