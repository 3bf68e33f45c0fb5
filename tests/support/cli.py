"""The command lines as a user runs them: ``python -m adapter ...`` (or ``legacy_sim``) in a folder,
to completion, with the output captured as text for the test to read."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["run_adapter", "run_module", "without_adapter_settings"]


def without_adapter_settings() -> dict[str, str]:
    """This environment minus every ``ADAPTER_*`` variable: the command sees only what a test sets."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ADAPTER_")}


def run_module(
    module: str,
    *args: str,
    cwd: Path,
    env: Mapping[str, str],
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python -m module args``; a failing exit is returned, not raised (tests assert on it)."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_adapter(
    *args: str, cwd: Path, env: Mapping[str, str], stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m adapter args``: the kit's CLI."""
    return run_module("adapter", *args, cwd=cwd, env=env, stdin=stdin, timeout=timeout)
