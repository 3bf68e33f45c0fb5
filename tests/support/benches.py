"""The benchmark scripts under ``bench/`` as modules, for the tests that run them small."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from adapter.bootstrap import Kit
from adapter.store.migrate import upgrade
from legacy_sim.engine import LegacyEngine
from legacy_sim.server import start_server

__all__ = ["kit_with_history", "load_bench"]

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` imported as the module ``name`` (once: a second call returns the first)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def kit_with_history(url: str, history: Any, workdir: Path) -> Iterator[Kit]:
    """A kit on the migrated store at ``url`` holding ``history`` (``bench/history.py``'s
    ``History``: finished imports with their operations and events), over a simulator of its own."""
    bench = load_bench("history")
    legacy = LegacyEngine(workdir / "legacy.db", idle_timeout=None)
    server = start_server(legacy, "127.0.0.1", 0)
    upgrade(url)
    kit = bench.build_kit(url, server.address, 100)
    try:
        bench.fill_history(kit, history)
        yield kit
    finally:
        kit.close()
        server.close()
        legacy.close()
