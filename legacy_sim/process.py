"""Run the simulator as its own process, the way a real legacy system runs beside the kit."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["running_simulator", "stop_process"]

_LISTENING = re.compile(r"listening on (?P<host>\S+):(?P<port>\d+)")


@contextlib.contextmanager
def running_simulator(db: Path, *args: str, host: str = "127.0.0.1") -> Iterator[tuple[str, int]]:
    """``python -m legacy_sim serve --port 0 --db DB [ARGS]`` as a child; yields its (host, port).

    The child is always stopped: terminate, then kill if it does not exit within 10 s.
    """
    command = [
        sys.executable,
        "-m",
        "legacy_sim",
        "serve",
        "--host",
        host,
        "--port",
        "0",
        "--db",
        str(db),
        *args,
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        if process.stdout is None:  # stdout=PIPE always gives one; never read from a closed stream
            raise RuntimeError("legacy_sim was started without a stdout pipe")
        line = process.stdout.readline()  # the server prints exactly this line once it listens
        match = _LISTENING.search(line)
        if match is None:
            raise RuntimeError(f"legacy_sim did not start (exit code {process.poll()}): {line!r}")
        yield match["host"], int(match["port"])
    finally:
        stop_process(process, timeout=10)


def stop_process(process: subprocess.Popen[str], timeout: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds; reaps it either way."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
