"""The handle secret: Settings only read it; start-up creates the key file once, owner-only."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from adapter.config import ConfigError, Settings, ensure_secret_file


def test_reading_the_secret_never_creates_a_file(tmp_path: Path) -> None:
    settings = Settings(secret=None, secret_file=str(tmp_path / "adapter.secret"))
    with pytest.raises(ConfigError, match="does not exist"):
        settings.secret_bytes()
    assert list(tmp_path.iterdir()) == []


def test_start_up_creates_the_key_file_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "adapter.secret"
    settings = Settings(secret=None, secret_file=str(path))

    ensure_secret_file(settings)
    first = settings.secret_bytes()
    ensure_secret_file(settings)  # a restart, or a second process: the same key

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first) == 64 and settings.secret_bytes() == first


def test_an_explicit_secret_writes_no_file(tmp_path: Path) -> None:
    path = tmp_path / "adapter.secret"
    settings = Settings(secret="s" * 32, secret_file=str(path))
    ensure_secret_file(settings)
    assert not path.exists()
    assert settings.secret_bytes() == b"s" * 32
