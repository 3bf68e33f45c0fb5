"""The garbage collector of a serving process, set once the process is built.

A worker holds about 200,000 long-lived objects once it is built (modules, the SDK's and pydantic's
schemas, SQLAlchemy's metadata and compiled statements) and then allocates and frees a few thousand
per request. With CPython's defaults the collector ran its youngest generation every 700 allocations
and rescanned every long-lived object at each full collection: under ``bench/load.py`` (32 clients,
one worker) it spent 2.2 s of a 20 s run collecting, 11 full collections of 130 ms each, about a
tenth of the worker's CPU, for almost no garbage (the kit's rows and requests die by reference count).

So a serving process freezes what it built (``gc.freeze``: never scanned again; it lives as long as
the process anyway) and collects its youngest generation every ``YOUNG_THRESHOLD`` allocations. Only
the serving entry points call this: a test process that builds many kits must not freeze them.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_collector"]

YOUNG_THRESHOLD = 20_000


def settle_collector() -> None:
    """Collect what building the process left, then freeze the rest and space out collections."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
