"""A small fake of the Acme ERP batch API, enough to develop and test the port against.

``python -m acme_erp.fake_server --port 8081 --token secret`` (from ``examples/``) serves it;
tests start :func:`create_app` with uvicorn. State lives in memory. ``POST /_faults`` with
``{"lose_commit_reply": true}`` makes the gateway answer ``504`` after a commit was applied, the
"reply lost" case a real ERP produces now and then; ``{"down": true}`` makes the ERP answer every
other request ``503`` (its maintenance window, "rejected before processing").
"""

from __future__ import annotations

import argparse
import itertools
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

KINDS = ("customers", "invoices")


class ErpState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: dict[str, dict[str, Any]] = {}
        self.ids = itertools.count(1)
        self.lose_commit_reply = False
        self.down = False


def _error(status: int, code: str) -> JSONResponse:
    return JSONResponse({"error": code}, status_code=status)


def _open(state: ErpState, batch_id: str) -> dict[str, Any] | JSONResponse:
    """The batch if it exists and is still open, else the ERP's error answer; hold ``state.lock``."""
    batch = state.batches.get(batch_id)
    if batch is None:
        return _error(404, "not_found")
    if batch["state"] != "open":
        return _error(409, "not_open")
    return batch


def create_app(token: str) -> FastAPI:
    app = FastAPI(title="fake Acme ERP")
    state = ErpState()
    app.state.erp = state

    @app.middleware("http")
    async def bearer(request: Request, call_next: Any) -> Response:
        if request.headers.get("authorization") != f"Bearer {token}":
            return _error(401, "unauthorized")
        if state.down and request.url.path != "/_faults":
            return _error(503, "maintenance")
        response: Response = await call_next(request)
        return response

    @app.post("/_faults")
    def faults(body: dict[str, Any]) -> dict[str, bool]:
        """Set the knobs named in ``body``; the others keep their values."""
        for knob in ("lose_commit_reply", "down"):
            if knob in body:
                setattr(state, knob, bool(body[knob]))
        return {"lose_commit_reply": state.lose_commit_reply, "down": state.down}

    @app.post("/batches", status_code=201, response_model=None)
    def open_batch(body: dict[str, Any]) -> dict[str, str] | JSONResponse:
        if body.get("kind") not in KINDS or not isinstance(body.get("ref"), str):
            return _error(422, "unknown_kind")
        with state.lock:
            batch_id = f"ERP-{next(state.ids)}"
            state.batches[batch_id] = {"id": batch_id, "ref": body["ref"], "state": "open", "lines": []}
        return {"id": batch_id}

    @app.get("/batches")
    def list_batches(ref: str) -> dict[str, Any]:
        with state.lock:
            found = [b for b in state.batches.values() if b["ref"] == ref]
            return {
                "batches": [
                    {"id": b["id"], "state": b["state"], "line_count": len(b["lines"])} for b in found
                ]
            }

    @app.post("/batches/{batch_id}/lines", response_model=None)
    def add_lines(batch_id: str, body: dict[str, Any]) -> dict[str, int] | JSONResponse:
        lines = body.get("lines")
        if not isinstance(lines, list) or not all(isinstance(line, dict) for line in lines):
            return _error(422, "bad_lines")
        with state.lock:
            batch = _open(state, batch_id)
            if isinstance(batch, JSONResponse):
                return batch
            batch["lines"].extend(lines)
            return {"line_count": len(batch["lines"])}

    @app.post("/batches/{batch_id}/commit", response_model=None)
    def commit(batch_id: str) -> dict[str, Any] | JSONResponse:
        with state.lock:
            batch = _open(state, batch_id)
            if isinstance(batch, JSONResponse):
                return batch
            batch["state"] = "committed"
            if state.lose_commit_reply:
                return _error(504, "gateway_timeout")  # applied, but the reply never arrives
            return {"id": batch_id, "line_count": len(batch["lines"])}

    @app.delete("/batches/{batch_id}", status_code=204, response_model=None)
    def discard(batch_id: str) -> Response:
        with state.lock:
            batch = _open(state, batch_id)
            if isinstance(batch, JSONResponse):
                return batch
            batch["state"] = "discarded"
        return Response(status_code=204)

    @app.post("/batches/{batch_id}/void", response_model=None)
    def void(batch_id: str) -> dict[str, bool] | JSONResponse:
        with state.lock:
            batch = state.batches.get(batch_id)
            if batch is None or batch["state"] not in ("committed", "voided"):
                return _error(404, "not_found")
            if batch["state"] == "voided":
                return _error(409, "already_voided")
            batch["state"] = "voided"
        return {"already_voided": False}

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m acme_erp.fake_server")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    uvicorn.run(create_app(args.token), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
