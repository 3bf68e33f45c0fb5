"""Counts SQL statements and transactions on the driver in every Python process of a benchmarked server.

``bench/load.py`` puts this folder on the server's ``PYTHONPATH`` with ``BENCH_STORE_COUNTS`` naming a
folder; Python imports ``sitecustomize`` at start-up in the server and in each spawned worker, and this
module then counts (``driver_counts``) and writes ``<pid>.json`` with the running totals (and the
time it wrote them) at start and whenever the process gets ``SIGUSR1``: the bench signals the
server's process group at the two ends of its window and waits for the fresh files.

Not on a timer: a thread that wrote the file every 50 ms cost each server process about 0.01 of a
core, half of an idle worker's CPU, charged to the kit (three processes with ``--workers 2``, so it
also inflated the two-worker ratio). Nothing of this is in the kit: without ``BENCH_STORE_COUNTS``
the module does nothing.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any


def _write(folder: Path, counts: dict[str, int]) -> None:
    path = folder / f"{os.getpid()}.json"
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({**counts, "written_at": time.time()}))
    partial.replace(path)


if os.environ.get("BENCH_STORE_COUNTS"):
    from driver_counts import COUNTS, install

    install()
    _folder = Path(os.environ["BENCH_STORE_COUNTS"])

    def _on_signal(_signum: int, _frame: Any) -> None:
        _write(_folder, COUNTS)

    signal.signal(signal.SIGUSR1, _on_signal)
    _write(_folder, COUNTS)
