"""Files start-up makes: the handle secret (Settings only read it; start-up creates the key file once,
owner-only) and, in local mode, the simulator's file only when the simulator is the port."""

from __future__ import annotations

import multiprocessing
import stat
from pathlib import Path
from typing import Any

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


def _start_and_read(secret_file: str, start: Any, keys: Any) -> None:
    """One process's start-up, released with the others at one moment: create the file, read the key."""
    settings = Settings(secret=None, secret_file=secret_file)
    start.wait()
    ensure_secret_file(settings)
    keys.put(settings.secret_bytes())


def test_processes_that_start_at_once_share_one_key(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    processes = 6
    start, keys = context.Barrier(processes), context.Queue()
    started = [
        context.Process(target=_start_and_read, args=(str(tmp_path / "adapter.secret"), start, keys))
        for _ in range(processes)
    ]
    for process in started:
        process.start()
    seen = [keys.get(timeout=60) for _ in started]
    for process in started:
        process.join(timeout=60)

    assert [process.exitcode for process in started] == [0] * processes
    assert len(set(seen)) == 1 and len(seen[0]) == 64


def test_an_explicit_secret_writes_no_file(tmp_path: Path) -> None:
    path = tmp_path / "adapter.secret"
    settings = Settings(secret="s" * 32, secret_file=str(path))
    ensure_secret_file(settings)
    assert not path.exists()
    assert settings.secret_bytes() == b"s" * 32


@pytest.mark.parametrize("own_port", [False, True])
def test_the_simulators_file_is_made_only_when_the_simulator_is_the_port(
    tmp_path: Path, own_port: bool
) -> None:
    """Local mode pre-creates the embedded simulator's file owner-only; a caller's own port needs none."""
    from adapter.bootstrap import build
    from adapter.legacy.simulator import SimulatorPort

    simulator_file = tmp_path / "legacy_sim.db"
    settings = Settings(
        secret="s" * 32, database_url=f"sqlite:///{tmp_path / 'adapter.db'}", legacy_db=str(simulator_file)
    )
    theirs = SimulatorPort.from_url("embedded", embedded_db_path=tmp_path / "theirs.db") if own_port else None

    build(settings, legacy=theirs).close()

    assert (tmp_path / "adapter.db").exists()
    assert simulator_file.exists() is not own_port
    if not own_port:
        assert stat.S_IMODE(simulator_file.stat().st_mode) == 0o600
