"""Operator sessions over real HTTP: the cookie is a server-side session, logout revokes it, it
expires, failed logins are limited; admin tokens that can be guessed are refused at start-up; a
token file others can read is warned about; the store's files are the owner's only; an ``ADAPTER_*``
variable no setting reads is warned about."""

from __future__ import annotations

import logging
import os
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter.config import ConfigError, load_settings
from adapter.startup import check_serving, warn_about_token_file
from tests.support.cli import run_adapter, without_adapter_settings

UI = "/admin/ui"


def _login(server: Any, client: httpx.Client, token: str) -> httpx.Response:
    return client.post(server.url + f"{UI}/login", data={"token": token}, headers={"Origin": server.url})


def test_the_cookie_is_a_session_that_logout_revokes(server: Any) -> None:
    with httpx.Client(timeout=30) as client:
        assert _login(server, client, server.operator_token).status_code == 303
        session = client.cookies.get("adapter_admin")
        assert session and server.operator_token not in session
        assert client.get(server.url + UI).status_code == 200
        # The same session also reads the API (GET) but cannot act there (actions need the header).
        assert client.get(server.url + "/admin/operations").status_code == 200
        out = client.post(server.url + f"{UI}/logout", headers={"Origin": server.url})
        assert out.status_code == 303
    # A copy of the cookie taken before logout is worth nothing now.
    with httpx.Client(timeout=30) as thief:
        thief.cookies.set("adapter_admin", session, path="/admin")
        assert thief.get(server.url + UI).status_code == 303
        assert thief.get(server.url + "/admin/operations").status_code == 401


def test_a_session_expires(server: Any) -> None:
    with httpx.Client(timeout=30) as client:
        assert _login(server, client, server.viewer_token).status_code == 303
        assert client.get(server.url + UI).status_code == 200
        ctx = server.kit.admin.ctx
        real_clock = ctx.clock
        ctx.clock = lambda: real_clock() + timedelta(hours=8, seconds=1)
        try:
            assert client.get(server.url + UI).status_code == 303
        finally:
            ctx.clock = real_clock


def test_the_raw_token_as_a_cookie_is_not_accepted(server: Any) -> None:
    with httpx.Client(timeout=30) as client:
        client.cookies.set("adapter_admin", server.operator_token, path="/admin")
        assert client.get(server.url + UI).status_code == 303


@pytest.mark.parametrize(
    "settings_overrides", [{"login_max_failures": 3, "login_failure_window_seconds": 60}]
)
def test_failed_logins_are_rate_limited(server: Any) -> None:
    with httpx.Client(timeout=30) as client:
        for _ in range(3):
            assert _login(server, client, "w" * 40).status_code == 401
        limited = _login(server, client, server.operator_token)  # even the right one waits now
        assert limited.status_code == 429
        assert 0 < int(limited.headers["retry-after"]) <= 60
        assert "adapter_admin" not in client.cookies


@pytest.mark.parametrize("token", ["short-token-of-31-characters-xx", "a" * 40, "7" * 64])
@pytest.mark.parametrize("name", ["admin_token", "admin_readonly_token"])
def test_weak_admin_tokens_are_refused_at_start_up(name: str, token: str) -> None:
    with pytest.raises(ConfigError, match=f"ADAPTER_{name.upper()}"):
        load_settings(**{name: token})


def test_a_strong_admin_token_is_accepted() -> None:
    assert load_settings(admin_token="x1" * 16).admin_token == "x1" * 16


def test_a_token_file_readable_by_others_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text("{}")
    tokens.chmod(0o600)
    settings = load_settings(tokens=str(tokens))
    with caplog.at_level(logging.WARNING, logger="adapter.startup"):
        assert warn_about_token_file(settings) is False
        tokens.chmod(0o644)
        assert warn_about_token_file(settings) is True
    assert "readable by other users" in caplog.text and "644" in caplog.text


def test_serving_refuses_a_grace_period_not_above_the_legacy_timeout() -> None:
    with pytest.raises(ConfigError, match="ADAPTER_UNKNOWN_GRACE_SECONDS"):
        check_serving(load_settings(unknown_grace_seconds=10, legacy_timeout_seconds=10))
    check_serving(load_settings(unknown_grace_seconds=11, legacy_timeout_seconds=10))


def test_serve_exits_2_on_such_a_grace_period(tmp_path: Path) -> None:
    env = without_adapter_settings()
    env.update(
        ADAPTER_UNKNOWN_GRACE_SECONDS="5",
        ADAPTER_LEGACY_TIMEOUT_SECONDS="10",
        ADAPTER_DATABASE_URL=f"sqlite:///{tmp_path / 'a.db'}",
    )
    done = run_adapter("serve", "--port", "0", cwd=tmp_path, env=env, timeout=60)
    assert done.returncode == 2
    assert "ADAPTER_UNKNOWN_GRACE_SECONDS" in done.stderr


@pytest.mark.parametrize("mode", ["local", "token"])
def test_store_files_are_created_owner_only(tmp_path: Path, mode: str) -> None:
    """In either mode: the files hold every tenant's records (before, token mode made them 0644)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}
    env["ADAPTER_SECRET"] = "s" * 40
    if mode == "token":
        tokens = tmp_path / "tokens.json"
        tokens.write_text('{"alice-token-0123456789": {"principal": "alice", "tenant": "acme"}}')
        tokens.chmod(0o600)
        env["ADAPTER_TOKENS"] = str(tokens)
    old = os.umask(0o022)  # the usual umask: without care, files come out world-readable
    try:
        for command in (["migrate"], ["reconcile"]):  # reconcile opens the embedded simulator too
            done = run_adapter(*command, cwd=tmp_path, env=env)
            assert done.returncode == 0, done.stderr
    finally:
        os.umask(old)
    made = [p for p in tmp_path.iterdir() if p.name.startswith(("adapter.db", "legacy_sim.db"))]
    assert {"adapter.db", "legacy_sim.db"} <= {p.name for p in made}
    for path in made:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, (path.name, oct(path.stat().st_mode))


def test_unknown_settings_are_named_at_start_up(tmp_path: Path) -> None:
    """A misspelt or made-up name used to be ignored without a word (the SQL port's docstring even
    named ``ADAPTER_SQL_SCHEMA`` for ``ADAPTER_SQL_SCHEMA_NAME``)."""
    env = without_adapter_settings()
    env.update(
        ADAPTER_DATABASE_URL=f"sqlite:///{tmp_path / 'a.db'}",
        ADAPTER_DATABSE_URL="sqlite:///typo.db",
        ADAPTER_SQL_SCHEMA="legacy",
        ADAPTER_SQL_SCHEMA_NAME="legacy",  # the real one: not named
        ADAPTER_MAX_BODY_BYTES="65536",
    )
    done = run_adapter("migrate", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "unknown settings" in line]
    assert line.endswith(
        "unknown settings ignored: ADAPTER_DATABSE_URL, ADAPTER_SQL_SCHEMA (see docs/operations.md, Settings)"
    )
    clean = run_adapter(
        "migrate",
        cwd=tmp_path,
        env={k: v for k, v in env.items() if k not in ("ADAPTER_DATABSE_URL", "ADAPTER_SQL_SCHEMA")},
    )
    assert "unknown settings" not in clean.stderr
