"""The warehouse: ``python -m tests.support.warehouse.server [--port N]`` prints ``listening on N``.

One JSON object per line each way. A batch belongs to the connection that began it and is dropped
when that connection ends; ``commit`` applies it as a new batch every time (not idempotent).

====================================  ==========================================================
request                               answer
====================================  ==========================================================
``{"op": "begin", "ref", "target"}``  ``{"ok": true}``; ``batch_open`` if this connection has one
``{"op": "add", "records": [...]}``   ``{"ok": true}``; ``no_batch``
``{"op": "commit"}``                  ``{"ok": true, "id": "W-7", "count": 3}``; ``no_batch``
``{"op": "rollback"}``                ``{"ok": true}``
``{"op": "status", "ref"}``           ``{"ok": true, "batches": [{"id", "count", "voided"}]}``
``{"op": "void", "id"}``              ``{"ok": true}``; ``unknown_batch``, ``already_voided``
``{"op": "faults", ...}``             sets the knobs given: ``lose_commit_reply`` (apply the next
                                      COMMITs, then hang up without a reply), ``down`` (hang up
                                      on every other request: an outage)
====================================  ==========================================================

Errors are ``{"ok": false, "error": "<code>"}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import socketserver
import threading
from typing import Any

LOCK = threading.Lock()
BATCHES: dict[str, dict[str, Any]] = {}  # id -> {"ref", "target", "count", "voided"}, in commit order
IDS = itertools.count(1)
FAULTS = {"lose_commit_reply": False, "down": False}


class Hangup(Exception):
    """Close the connection without answering."""


def _status(ref: str) -> dict[str, Any]:
    found = [
        {"id": batch_id, "count": b["count"], "voided": b["voided"]}
        for batch_id, b in BATCHES.items()
        if b["ref"] == ref
    ]
    return {"ok": True, "batches": found}


def _void(batch_id: str) -> dict[str, Any]:
    batch = BATCHES.get(batch_id)
    if batch is None:
        return {"ok": False, "error": "unknown_batch"}
    if batch["voided"]:
        return {"ok": False, "error": "already_voided"}
    batch["voided"] = True
    return {"ok": True}


class Connection(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.batch: dict[str, Any] | None = None
        for line in self.rfile:
            try:
                answer = self.answer(json.loads(line))
            except Hangup:
                return
            self.wfile.write(json.dumps(answer).encode() + b"\n")
            self.wfile.flush()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        with LOCK:
            if op == "faults":
                FAULTS.update({k: bool(v) for k, v in request.items() if k in FAULTS})
                return {"ok": True, **FAULTS}
            if FAULTS["down"]:
                raise Hangup
            if op == "status":
                return _status(str(request["ref"]))
            if op == "void":
                return _void(str(request["id"]))
            return self.in_session(op, request)

    def in_session(self, op: object, request: dict[str, Any]) -> dict[str, Any]:
        if op == "begin":
            if self.batch is not None:
                return {"ok": False, "error": "batch_open"}
            self.batch = {"ref": str(request["ref"]), "target": str(request["target"]), "records": []}
            return {"ok": True}
        if op == "rollback":
            self.batch = None
            return {"ok": True}
        if self.batch is None:
            return {"ok": False, "error": "no_batch"}
        if op == "add":
            self.batch["records"].extend(request["records"])
            return {"ok": True}
        if op == "commit":
            batch, self.batch = self.batch, None
            batch_id = f"W-{next(IDS)}"
            BATCHES[batch_id] = {"ref": batch["ref"], "count": len(batch["records"]), "voided": False}
            if FAULTS["lose_commit_reply"]:
                raise Hangup  # applied; the reply is lost
            return {"ok": True, "id": batch_id, "count": len(batch["records"])}
        return {"ok": False, "error": "unknown_op"}


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.warehouse.server")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with Server(("127.0.0.1", args.port), Connection) as server:
        print(f"listening on {server.server_address[1]}", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
