"""Counts SQL statements and transactions on the driver in every Python process of a benchmarked server.

``bench/load.py`` puts this folder on the server's ``PYTHONPATH`` with ``BENCH_STORE_COUNTS`` naming a
folder; Python imports ``sitecustomize`` at start-up in the server and in each spawned worker, and this
module then counts (``driver_counts``) and writes ``<pid>.json`` with the running totals every 50 ms.
Nothing of this is in the kit: without ``BENCH_STORE_COUNTS`` the module does nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path


def _write_forever(folder: Path, counts: dict[str, int]) -> None:
    path = folder / f"{os.getpid()}.json"
    while True:
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(counts))
        partial.replace(path)
        time.sleep(0.05)


if os.environ.get("BENCH_STORE_COUNTS"):
    from driver_counts import COUNTS, install

    install()
    folder = Path(os.environ["BENCH_STORE_COUNTS"])
    threading.Thread(target=_write_forever, args=(folder, COUNTS), daemon=True, name="bench-counts").start()
