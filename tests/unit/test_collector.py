"""The serving process's collector settings (``adapter/entrypoints/collector.py``), in a process of
their own: freezing is for a server, never for this test process."""

from __future__ import annotations

import json
import subprocess
import sys

from adapter.entrypoints.collector import YOUNG_THRESHOLD

_PROBE = """
import gc, json
from adapter.entrypoints.collector import settle_collector
before = {"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}
settle_collector()
print(json.dumps({"before": before, "frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}))
"""


def test_a_settled_process_freezes_what_it_built_and_collects_its_young_less_often() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout)
    assert seen["before"]["frozen"] == 0
    assert seen["frozen"] > 1000  # the modules, classes and functions the imports built
    assert seen["threshold"][0] == YOUNG_THRESHOLD
    assert seen["threshold"][1:] == seen["before"]["threshold"][1:]  # the older generations as they were
