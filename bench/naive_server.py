"""The naive wrapper a user would otherwise write (bench-only): the legacy session in process memory.

A minimal server on the same MCP SDK (``MCPServer``, Streamable HTTP, stateless): ``begin_import``
opens a legacy session (a TCP connection to the simulator) and sends BEGIN, ``add_records`` sends ADD
at once, ``commit_import`` sends COMMIT. The sessions live in a dict of this one process: no store, no
idempotency, no recovery points, no leases, no confirmation, no auth; a crash or a second worker
loses them, a retried commit can commit twice. ``bench/load.py`` measures the kit against it.

Run: ``python bench/naive_server.py --port P --legacy tcp://HOST:PORT``.
"""

from __future__ import annotations

import argparse
import secrets
import threading
from collections.abc import Sequence
from typing import Any

import anyio.to_thread
import uvicorn
from mcp.server.mcpserver import MCPServer

from adapter.legacy.simulator import SimulatorPort, SimulatorSession


def build(legacy_url: str) -> MCPServer:
    port = SimulatorPort.from_url(legacy_url, timeout=30.0)
    sessions: dict[str, SimulatorSession] = {}
    lock = threading.Lock()
    server: MCPServer = MCPServer("naive-import-wrapper")

    def begin(target: str) -> dict[str, Any]:
        session = port.open_session()
        handle = "nv_" + secrets.token_hex(8)
        session.begin(f"{target}:{handle}")
        with lock:
            sessions[handle] = session
        return {"handle": handle, "status": "open"}

    def add(handle: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        with lock:
            session = sessions[handle]
        session.add(records)
        return {"handle": handle, "accepted": len(records)}

    def commit(handle: str) -> dict[str, Any]:
        with lock:
            session = sessions.pop(handle)
        try:
            batch = session.commit()
        finally:
            session.close()
        return {"handle": handle, "status": "committed", "legacy_batch_id": batch.legacy_batch_id}

    @server.tool()
    async def begin_import(target: str) -> dict[str, Any]:
        """Open a legacy batch."""
        return await anyio.to_thread.run_sync(begin, target)

    @server.tool()
    async def add_records(handle: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        """Send records to the open legacy batch."""
        return await anyio.to_thread.run_sync(add, handle, records)

    @server.tool()
    async def commit_import(handle: str) -> dict[str, Any]:
        """Commit the legacy batch."""
        return await anyio.to_thread.run_sync(commit, handle)

    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--legacy", required=True)
    args = parser.parse_args(argv)
    app = build(args.legacy).streamable_http_app(stateless_http=True, json_response=False)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
