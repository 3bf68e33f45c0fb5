"""The kit factory: ``adapter.bootstrap.build`` on a migrated test database and the TCP simulator.

Tests get the very wiring the entry points get; what they need changed goes in as settings or as
``build``'s own overrides (fast commit retries), never by reaching into the services afterwards.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adapter.bootstrap import Kit, build, commit_policy_for
from adapter.config import Settings, load_settings
from adapter.store import Store
from tests.support.constants import FAST_RETRIES, SECRET, TOKENS, UNMETERED, UNMETERED_HTTP


def write_tokens(path: Path, tokens: dict[str, dict[str, str]] = TOKENS) -> Path:
    """An MCP token file (bearer token -> principal) at ``path``."""
    path.write_text(json.dumps(tokens))
    return path


def kit_settings(db_url: str, legacy_address: tuple[str, int], tmp_path: Path, **overrides: Any) -> Settings:
    """Settings for one test: its database, the simulator over TCP, the shared secret, the token
    file of alice and bob (``tokens=None`` is local mode), rates no test reaches unless it sets them
    (``UNMETERED``); ``overrides`` win."""
    host, port = legacy_address
    values: dict[str, Any] = {
        "database_url": db_url,
        "legacy_url": f"tcp://{host}:{port}",
        "secret": SECRET,
        "secret_file": str(tmp_path / "unused.secret"),
        "tokens": str(write_tokens(tmp_path / "tokens.json")),
        "legacy_timeout_seconds": 10.0,
        **UNMETERED,
        **UNMETERED_HTTP,
    }
    values.update(overrides)
    return load_settings(**values)


@contextlib.contextmanager
def running_kit(settings: Settings, store: Store, *, fast_retries: bool = True) -> Iterator[Kit]:
    """``build(settings, store=store)``, closed afterwards; with ``fast_retries`` the commit flow
    retries after milliseconds (the attempts stay as the settings say)."""
    policy = commit_policy_for(settings, FAST_RETRIES if fast_retries else None)
    kit = build(settings, store=store, commit_policy=policy)
    try:
        yield kit
    finally:
        kit.close()
