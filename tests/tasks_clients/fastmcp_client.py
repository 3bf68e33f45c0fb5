"""The FastMCP 4 client with ``fastmcp-tasks`` against the adapter: one scenario per run.

Run with the interpreter of ``.venv-fastmcp`` (``make tasks-clients``), never the project's: this is
a client someone else wrote, on its own pinned dependencies. ``tests/mcp/test_tasks_fastmcp.py``
starts the server, runs a scenario and checks what this prints: one JSON object, the last line
of stdout, with what the client saw (and ``wire``: every request it sent, as method and headers).

    python fastmcp_client.py SCENARIO --url URL --token TOKEN [--other-url URL] [--bob-token T]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import fastmcp_tasks  # importing it turns on the client's task support
import httpx2
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError
from fastmcp_tasks import ToolTask, call_tool_task
from mcp.shared.exceptions import MCPError

TERMINAL = ("completed", "failed", "cancelled")


class Wire:
    """Every request the client sends: JSON-RPC method, ``Mcp-Name``, and the body's task id."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def _record(self, request: httpx2.Request) -> None:
        try:
            body = json.loads(request.content or b"null")
        except ValueError:
            return
        if isinstance(body, dict) and "method" in body:
            params = body.get("params") or {}
            self.sent.append(
                {
                    "method": body["method"],
                    "mcp_name": request.headers.get("mcp-name"),
                    "task_id": params.get("taskId"),
                    "tool": params.get("name"),
                }
            )

    def factory(self, **kwargs: Any) -> httpx2.AsyncClient:
        kwargs.setdefault("timeout", httpx2.Timeout(30.0, read=120.0))
        client = httpx2.AsyncClient(**kwargs)
        client.event_hooks.setdefault("request", []).append(self._record)
        return client


def connect(url: str, token: str, wire: Wire, **options: Any) -> Client:
    transport = StreamableHttpTransport(url, auth=token, httpx_client_factory=wire.factory)
    return Client(transport, **options)


async def stage(client: Client, count: int) -> str:
    begun = await client.call_tool("begin_import", {"target": "customers"})
    handle = begun.structured_content["handle"]
    records = [{"id": i, "name": f"r {i}"} for i in range(count)]
    await client.call_tool("add_records", {"handle": handle, "records": records})
    return handle


async def statuses_until_terminal(task: ToolTask, pause: float = 0.05) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for _ in range(1200):
        current = await task.status()
        seen.append({"status": current.status, "message": current.status_message})
        if current.status in TERMINAL:
            return seen
        await asyncio.sleep(pause)
    raise TimeoutError(f"task {task.task_id} never ended: {seen[-3:]}")


def refusal(exc: MCPError) -> dict[str, Any]:
    return {"code": exc.error.code, "message": exc.error.message}


async def lifecycle(args: argparse.Namespace, wire: Wire) -> dict[str, Any]:
    """A task is created, ``tasks/get`` goes ``working`` then ``completed`` with the result; the
    transparent ``call_tool`` drives a second commit the same way without showing the task."""
    async with connect(args.url, args.token, wire) as client:
        protocol = client.session._negotiated_version  # what discovery agreed on
        handle = await stage(client, args.records)
        task = await call_tool_task(client, "commit_import", {"handle": handle})
        created = task.create_result.model_dump(by_alias=True, mode="json", exclude={"meta"})
        seen = await statuses_until_terminal(task)
        final = await task.status()
        result = await task.result()
        second = await stage(client, 2)
        transparent = await client.call_tool("commit_import", {"handle": second})
    return {
        "version": fastmcp_tasks.__version__,
        "protocol": protocol,
        "created": created,
        "seen": seen,
        "final": {"status": final.status, "result": final.result},
        "result": result.structured_content,
        "transparent": transparent.structured_content,
    }


async def cancel(args: argparse.Namespace, wire: Wire) -> dict[str, Any]:
    """``tasks/cancel`` while the records are still being sent (before COMMIT)."""
    async with connect(args.url, args.token, wire) as client:
        handle = await stage(client, args.records)
        task = await call_tool_task(client, "commit_import", {"handle": handle})
        await asyncio.sleep(args.cancel_after)
        before = await task.status()
        await task.cancel()
        final = await task.wait(timeout=60)
        try:
            await task.result()
            raised = None
        except ToolError as exc:
            raised = str(exc)
        status = await client.call_tool("get_import_status", {"handle": handle})
    return {
        "before": before.status,
        "final": final.status,
        "message": final.status_message,
        "raised": raised,
        "import": status.structured_content["status"],
        "task_id": task.task_id,
    }


async def foreign(args: argparse.Namespace, wire: Wire) -> dict[str, Any]:
    """Bob asks about Alice's task, and about a task id nobody has."""
    async with connect(args.url, args.token, wire) as alice:
        handle = await stage(alice, 1)
        task = await call_tool_task(alice, "commit_import", {"handle": handle})
        await task.result()
    unknown_task = task.create_result.model_copy(update={"task_id": "0" * 32})
    answers: dict[str, Any] = {"task_id": task.task_id}
    async with connect(args.url, args.bob_token, wire) as bob:
        for label, created in (("foreign", task.create_result), ("unknown", unknown_task)):
            handle_of_bob = ToolTask(bob, "commit_import", created)
            for verb in ("status", "cancel"):
                try:
                    await getattr(handle_of_bob, verb)()
                    answers[f"{label}_{verb}"] = "answered"
                except MCPError as exc:
                    answers[f"{label}_{verb}"] = refusal(exc)
    async with connect(args.url, args.token, wire) as alice:
        answers["owner_after"] = (await ToolTask(alice, "commit_import", task.create_result).status()).status
    return answers


async def confirm(args: argparse.Namespace, wire: Wire) -> dict[str, Any]:
    """A client that can show a form: the commit asks (MRTR) first, then becomes a task."""
    asked: list[str] = []

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> dict[str, bool]:
        asked.append(message)
        asked_at.append(len(wire.sent))
        return {"confirm": True}

    asked_at: list[int] = []
    async with connect(args.url, args.token, wire, elicitation_handler=on_elicit) as client:
        handle = await stage(client, args.records)
        try:  # the explicit task call does not drive the MRTR round (README says so)
            await call_tool_task(client, "commit_import", {"handle": handle})
            explicit = "a task"
        except RuntimeError as exc:
            explicit = str(exc)
        start = len(wire.sent)
        result = await client.call_tool("commit_import", {"handle": handle})
    return {
        "explicit": explicit,
        "asked": asked,
        "asked_after": [n - start for n in asked_at],
        "commit_wire": wire.sent[start:],
        "result": result.structured_content,
    }


async def elsewhere(args: argparse.Namespace, wire: Wire) -> dict[str, Any]:
    """The task is created on one worker and followed to its end on another."""
    async with connect(args.url, args.token, wire) as client:
        handle = await stage(client, args.records)
        task = await call_tool_task(client, "commit_import", {"handle": handle})
    async with connect(args.other_url, args.token, wire) as other:
        there = ToolTask(other, "commit_import", task.create_result)
        seen = await statuses_until_terminal(there)
        result = await there.result()
    return {"task_id": task.task_id, "seen": seen, "result": result.structured_content}


SCENARIOS = {
    "lifecycle": lifecycle,
    "cancel": cancel,
    "foreign": foreign,
    "confirm": confirm,
    "elsewhere": elsewhere,
}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--other-url")
    parser.add_argument("--bob-token")
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--cancel-after", type=float, default=0.5)
    args = parser.parse_args()
    wire = Wire()
    try:
        out = await SCENARIOS[args.scenario](args, wire)
    except Exception as exc:
        print(json.dumps({"fatal": f"{type(exc).__name__}: {exc}", "wire": wire.sent}))
        sys.exit(1)
    print(json.dumps({**out, "wire": wire.sent}, default=str))


if __name__ == "__main__":
    asyncio.run(main())
