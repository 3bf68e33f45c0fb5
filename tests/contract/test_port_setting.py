"""ADAPTER_LEGACY_PORT selects the port for every entry point; a bad one stops start-up with one line."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.support.cli import run_adapter, without_adapter_settings
from tests.support.servers import free_port, stop_process
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow  # subprocesses

MODULE = """
from pathlib import Path

from adapter.legacy.simulator import SimulatorPort


def good(settings):
    with Path("factory-calls.txt").open("a") as calls:
        calls.write(settings.server_name + "\\n")
    return SimulatorPort.from_url("embedded", embedded_db_path="legacy.db")


def unreachable(settings):
    return SimulatorPort.from_url("tcp://127.0.0.1:1")  # nothing listens there


def not_a_port(settings):
    return object()


def broken(settings):
    raise RuntimeError("the ERP answered 401\\nsecond line")


NOT_CALLABLE = 3
"""

COMMANDS = {
    "serve": ["serve", "--port", "1"],
    "stdio": ["stdio"],
    "reconcile": ["reconcile"],
    "ops": ["ops", "list"],
    "check-port": ["check-port", "user_port:good"],
}


def _env(folder: Path, setting: str | None) -> dict[str, str]:
    env = without_adapter_settings()
    env.update({"ADAPTER_DATABASE_URL": f"sqlite:///{folder / 'adapter.db'}", "ADAPTER_SECRET": "k" * 40})
    if setting is not None:
        env["ADAPTER_LEGACY_PORT"] = setting
    return env


def _run(folder: Path, setting: str | None, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run_adapter(*args, cwd=folder, env=_env(folder, setting), stdin=stdin)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "user_port.py").write_text(textwrap.dedent(MODULE))
    assert _run(tmp_path, None, "migrate").returncode == 0
    return tmp_path


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("no_such_module:make", "cannot import 'no_such_module': ModuleNotFoundError"),
        ("user_port:missing", "module 'user_port' has no attribute 'missing'"),
        ("user_port:NOT_CALLABLE", "user_port:NOT_CALLABLE is not callable"),
        ("user_port:not_a_port", "returned object, not a LegacyPort"),
        ("user_port:broken", "user_port:broken(settings) failed: RuntimeError: the ERP answered 401"),
        ("user_port", "String should match pattern"),
    ],
)
def test_a_bad_port_setting_stops_serve_with_one_line(folder: Path, setting: str, message: str) -> None:
    done = _run(folder, setting, *COMMANDS["serve"])

    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("adapter: invalid setting ADAPTER_LEGACY_PORT: ")
    assert message in line


@pytest.mark.parametrize("command", ["stdio", "reconcile", "ops"])
def test_every_entry_point_refuses_a_bad_port_the_same_way(folder: Path, command: str) -> None:
    done = _run(folder, "user_port:not_a_port", *COMMANDS[command])

    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith(
        "returned object, not a LegacyPort (it needs open_session, batch_status and void_batch)"
    )


@pytest.mark.parametrize("command", ["stdio", "reconcile", "ops", "check-port"])
def test_every_entry_point_builds_the_port_the_setting_names(folder: Path, command: str) -> None:
    done = _run(folder, "user_port:good", *COMMANDS[command])

    assert done.returncode in (0, 1), done.stderr  # check-port: 1 without a fault hook
    assert (folder / "factory-calls.txt").read_text().splitlines() == ["legacy-import-adapter"]
    assert (folder / "legacy.db").exists()  # the user's factory chose this simulator database


def test_unset_the_simulator_is_the_port(folder: Path) -> None:
    done = _run(folder, None, "reconcile")

    assert done.returncode == 0, done.stderr
    assert not (folder / "factory-calls.txt").exists()


def test_a_port_of_ones_own_leaves_no_simulator_file(tmp_path: Path) -> None:
    """With ADAPTER_LEGACY_PORT set the simulator is not the port, so start-up creates no file of it."""
    (tmp_path / "user_port.py").write_text(textwrap.dedent(MODULE))

    for command in (["migrate"], COMMANDS["reconcile"]):
        done = _run(tmp_path, "user_port:good", *command)
        assert done.returncode == 0, done.stderr

    assert (tmp_path / "adapter.db").exists()
    assert not (tmp_path / "legacy_sim.db").exists()  # the default ADAPTER_LEGACY_DB, unused here


def _ready(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url + "/readyz", timeout=5)
    except httpx.TransportError:
        return None  # not listening yet


@pytest.mark.parametrize(("setting", "status"), [(None, 200), ("user_port:unreachable", 503)])
def test_readyz_asks_the_port_the_setting_names(folder: Path, setting: str | None, status: int) -> None:
    """The embedded simulator answers; the user's port (a system nobody listens for) does not."""
    port = free_port()
    command = [sys.executable, "-m", "adapter", "serve", "--port", str(port)]
    env = _env(folder, setting)
    process = subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: process.poll() is not None or _ready(url) is not None, timeout=60, what="serve to listen"
        )
        answer = _ready(url)
        assert answer is not None, process.stderr.read().decode() if process.stderr else ""
    finally:
        stop_process(process)

    assert answer.status_code == status
    problems = answer.json()["problems"]
    assert problems == ([] if status == 200 else ["legacy system unreachable: LegacyTransient"])
