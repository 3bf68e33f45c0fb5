"""strands-agents' MCP client (``MCPClient`` with ``tasks_config``) against the adapter: one scenario.

Run with the interpreter of ``.venv-strands`` (``make tasks-clients``): strands-agents pins
``mcp<2.2``, so it cannot share the project's environment (``mcp>=2.3``) nor FastMCP's.
``tests/mcp/test_tasks_strands.py`` runs a scenario and checks the JSON object this prints on the
last line of stdout (``wire``: every request the client sent, as method and headers).

    python strands_client.py SCENARIO --url URL --token TOKEN [--bob-token T]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import httpx2
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult
from strands.tools.mcp import MCPClient
from strands.tools.mcp._compat import streamable_http_transport  # what MCPClient's own docs use on 2.x

TERMINAL = ("completed", "failed", "cancelled")


class Wire(httpx2.Auth):
    """The bearer token on each request, and a record of it: method, ``Mcp-Name``, task id."""

    def __init__(self, token: str, sent: list[dict[str, Any]]) -> None:
        self.token = token
        self.sent = sent

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        try:
            body = json.loads(request.content or b"null")
        except ValueError:
            body = None
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
        yield request


def connect(url: str, token: str, sent: list[dict[str, Any]], **options: Any) -> MCPClient:
    wire = Wire(token, sent)
    config = {"poll_interval": timedelta(milliseconds=100), "poll_timeout": timedelta(seconds=60)}
    return MCPClient(lambda: streamable_http_transport(url, auth=wire), tasks_config=config, **options)


def stage(client: MCPClient, count: int) -> str:
    begun = client.call_tool_sync("begin", "begin_import", {"target": "customers"})
    handle: str = begun["structuredContent"]["handle"]
    records = [{"id": i, "name": f"r {i}"} for i in range(count)]
    client.call_tool_sync("add", "add_records", {"handle": handle, "records": records})
    return handle


def statuses_until_terminal(client: MCPClient, task_id: str) -> tuple[list[dict[str, Any]], Any]:
    seen: list[dict[str, Any]] = []
    for _ in range(1200):
        current = client.get_task_sync(task_id)
        seen.append({"status": current.status, "message": current.status_message})
        if current.status in TERMINAL:
            return seen, current
        time.sleep(0.05)
    raise TimeoutError(f"task {task_id} never ended: {seen[-3:]}")


def lifecycle(args: argparse.Namespace, sent: list[dict[str, Any]]) -> dict[str, Any]:
    """``submit_tool_sync`` creates the task, ``get_task_sync`` follows it; ``call_tool_sync``
    (what an agent's tool call uses) drives a second commit's task itself."""
    with connect(args.url, args.token, sent) as client:
        handle = stage(client, args.records)
        created = client.submit_tool_sync("commit_import", {"handle": handle})
        seen, final = statuses_until_terminal(client, created.task_id)
        second = stage(client, 2)
        transparent = client.call_tool_sync("commit", "commit_import", {"handle": second})
    return {
        "created": created.model_dump(by_alias=True, mode="json", exclude={"meta"}),
        "seen": seen,
        "result": final.result.structured_content if final.result else None,
        "transparent": transparent.get("structuredContent"),
    }


def cancel(args: argparse.Namespace, sent: list[dict[str, Any]]) -> dict[str, Any]:
    with connect(args.url, args.token, sent) as client:
        handle = stage(client, args.records)
        created = client.submit_tool_sync("commit_import", {"handle": handle})
        time.sleep(args.cancel_after)
        before = client.get_task_sync(created.task_id).status
        client.cancel_task_sync(created.task_id)
        _, final = statuses_until_terminal(client, created.task_id)
        status = client.call_tool_sync("status", "get_import_status", {"handle": handle})
    return {
        "before": before,
        "final": final.status,
        "message": final.status_message,
        "import": status["structuredContent"]["status"],
    }


def foreign(args: argparse.Namespace, sent: list[dict[str, Any]]) -> dict[str, Any]:
    with connect(args.url, args.token, sent) as alice:
        handle = stage(alice, 1)
        task_id = alice.submit_tool_sync("commit_import", {"handle": handle}).task_id
        statuses_until_terminal(alice, task_id)
    answers: dict[str, Any] = {"task_id": task_id}
    with connect(args.url, args.bob_token, sent) as bob:
        for label, asked in (("foreign", task_id), ("unknown", "0" * 32)):
            for verb in ("get", "cancel"):
                try:
                    getattr(bob, f"{verb}_task_sync")(asked)
                    answers[f"{label}_{verb}"] = "answered"
                except MCPError as exc:
                    answers[f"{label}_{verb}"] = {"code": exc.error.code, "message": exc.error.message}
    return answers


def confirm(args: argparse.Namespace, sent: list[dict[str, Any]]) -> dict[str, Any]:
    asked: list[str] = []
    asked_at: list[int] = []

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        asked_at.append(len(sent))
        return ElicitResult(action="accept", content={"confirm": True})

    with connect(args.url, args.token, sent, elicitation_callback=on_elicit) as client:
        handle = stage(client, args.records)
        start = len(sent)
        result = client.call_tool_sync("commit", "commit_import", {"handle": handle})
    return {
        "asked": asked,
        "asked_after": [n - start for n in asked_at],
        "commit_wire": sent[start:],
        "result": result.get("structuredContent"),
        "is_error": result["status"] != "success",
        "text": [block.get("text") for block in result.get("content", [])],
    }


SCENARIOS = {"lifecycle": lifecycle, "cancel": cancel, "foreign": foreign, "confirm": confirm}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--bob-token")
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--cancel-after", type=float, default=0.5)
    args = parser.parse_args()
    sent: list[dict[str, Any]] = []
    try:
        out = SCENARIOS[args.scenario](args, sent)
    except Exception as exc:
        print(json.dumps({"fatal": f"{type(exc).__name__}: {exc}", "wire": sent}, default=str))
        sys.exit(1)
    print(json.dumps({**out, "wire": sent}, default=str))


if __name__ == "__main__":
    main()
