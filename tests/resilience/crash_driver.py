"""A kit process to be killed: stage an import, commit it, and stop at a chosen point of the commit.

Run by ``tests/resilience/test_crash.py`` as ``python crash_driver.py --point P --key K --records N``
with the kit configured from ``ADAPTER_*`` (the database and the simulator at ``tcp://HOST:PORT`` are
shared with the test). It prints one line per step to stdout (flushed) so the test knows where it is:

* ``import <import_id> <handle>`` once the records are staged;
* ``progress <sent> <total>`` from the commit's progress callback;
* ``at <point>`` when it reaches the point it was asked to stop at; then it waits for one line on
  stdin (``go``) before going on, so the test can SIGKILL it exactly there. EOF on stdin (the test
  went away) makes it exit at once without going on, like a crash.

Points, in the order the commit reaches them:

* ``begin``: after the claim, right before BEGIN goes to the legacy system (recovery point replaying);
* ``added``: after the first chunk of records was ADDed (first progress line);
* ``commit``: after the recovery point ``commit_sent`` was written, right before COMMIT goes out; after
  ``go`` it prints ``sending`` and sends COMMIT (the test slows the simulator to keep it in flight);
* ``returned``: COMMIT answered, before the outcome is recorded;
* ``none``: no stop; prints ``result <status> <legacy_batch_id>``.

The records are ``make_records(key, n)``, so the test knows exactly what must land.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

POINTS = ("begin", "added", "commit", "returned", "none")
PRINCIPAL_SUBJECT, PRINCIPAL_TENANT = "crash-test", "resilience"


def make_records(key: str, n: int) -> list[dict[str, Any]]:
    return [{"key": key, "n": i, "payload": f"{key}-{i:05d}"} for i in range(n)]


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def stop_here(point: str, wanted: str) -> None:
    """Announce the point; if it is the wanted one, wait for ``go`` (or die on EOF)."""
    if point != wanted:
        return
    say(f"at {point}")
    if not sys.stdin.readline():
        os._exit(3)  # the test is gone: never continue a commit nobody watches


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--point", choices=POINTS, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--records", type=int, default=40)
    parser.add_argument("--add-batch", type=int, default=10)
    args = parser.parse_args(argv)

    from adapter.bootstrap import build, build_legacy_port
    from adapter.config import load_settings
    from adapter.domain.identity import Principal
    from adapter.legacy.forwarding import ForwardingPort, ForwardingSession
    from adapter.ports.legacy import CommittedBatch

    wanted = args.point

    class HookedSession(ForwardingSession):
        def begin(self, batch_ref: str) -> None:
            stop_here("begin", wanted)
            super().begin(batch_ref)

        def commit(self) -> CommittedBatch:
            stop_here("commit", wanted)
            if wanted == "commit":
                say("sending")
            batch = super().commit()
            stop_here("returned", wanted)
            return batch

    class HookedPort(ForwardingPort):
        def open_session(self) -> HookedSession:
            return HookedSession(self._inner.open_session())

    settings = load_settings()
    kit = build(settings, legacy=HookedPort(build_legacy_port(settings)))
    service = kit.service
    who = Principal(subject=PRINCIPAL_SUBJECT, tenant=PRINCIPAL_TENANT)
    records = make_records(args.key, args.records)
    handle = service.begin(who, "crash-test", idempotency_key=f"{args.key}-begin").handle
    for start in range(0, len(records), args.add_batch):
        service.add(
            who, handle, records[start : start + args.add_batch], idempotency_key=f"{args.key}-add-{start}"
        )
    say(f"import {service.status(who, handle).import_id} {handle}")

    first = [True]

    def progress(sent: int, total: int) -> None:
        say(f"progress {sent} {total}")
        if first[0]:
            first[0] = False
            stop_here("added", wanted)

    result = service.commit(who, handle, idempotency_key=args.key, progress=progress)
    say(f"result {result.status} {result.legacy_batch_id}")
    kit.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
