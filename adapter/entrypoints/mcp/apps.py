"""MCP Apps (``io.modelcontextprotocol/ui``): a view of an import that a host renders beside the call.

A person asked "Commit 3,000 staged records into 'customers'?" would rather look first. Hosts that
render MCP Apps (Claude, ChatGPT, VS Code and more) show a ``ui://`` view beside a tool call whose
definition names it. This module builds that view with the SDK's Apps extension
(:class:`mcp.server.apps.Apps`) and applies it to the low-level server as ``MCPServer`` would apply
an additive extension: the view's HTML is its one resource, ``commit_import`` and
``get_import_status`` are its tools (``_meta.ui.resourceUri``), and the extension is advertised in
the server's capabilities.

* **Only for hosts that declared it.** A request whose client did not declare the extension (with
  the ``text/html;profile=mcp-app`` MIME type; ``client_supports_apps``) gets exactly what it got
  before: no ``_meta.ui`` on any tool, and neither the ``ui://`` view nor the review below is found.
  The tools' results, texts and confirmations never change. ``ADAPTER_APPS_VIEW=false`` turns it
  all off, the advertisement included.
* **Reads the caller may make.** The view reads ``import://{handle}/review?after=N&size=M``
  (``ImportService.review``: the caller's own import only, a page of staged records, per-field
  missing counts, the question a confirmation would ask and what it binds) and calls the tools the
  caller may call, through the host. Commit and Abort are ``commit_import`` and ``abort_import``:
  the server asks the person (the host shows its form) as it always does, and commits or voids only
  what that question named.
* **Nothing from outside.** The HTML, its style and its script ship in the package
  (``views/``; the script is ``apps/view/review.js`` bundled with the official ``App`` class) and are
  inlined into one document whose Content-Security-Policy allows exactly that style and that script
  (by their SHA-256), no connection, no font, no frame, no form target. The resource's
  ``_meta.ui.csp`` declares no domain, so a host allows none either.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp.server import ServerRequestContext
from mcp.server.apps import APP_MIME_TYPE, Apps, ResourceCsp, client_supports_apps
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver.resources import Resource
from mcp.shared.exceptions import MCPError
from mcp_types import ReadResourceResult, TextResourceContents
from mcp_types import Tool as ToolDefinition

from adapter import __version__
from adapter.domain.errors import HandleNotFound, InvalidRequest
from adapter.domain.identity import Principal
from adapter.entrypoints.mcp.tools import Tool, run_in_thread
from adapter.services import ImportReview, ImportService

__all__ = ["REVIEW_SUFFIX", "VIEW_TOOLS", "ImportReviewApp", "render_view", "review_body"]

INVALID_PARAMS = -32602
VIEW_TOOLS = ("commit_import", "get_import_status")
"""The tools whose calls a host shows the view beside (by base name; a tool prefix applies)."""
CALLED_TOOLS = ("commit_import", "abort_import", "get_import_status", "get_operation_status")
"""The tools the view itself calls through the host."""
REVIEW_SUFFIX = "/review"
_IMPORT = "import://"
_VIEWS = resources.files("adapter.entrypoints.mcp") / "views"


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def render_view(config: Mapping[str, Any]) -> str:
    """The view as one HTML document: its style and script inlined, allowed by hash and nothing else.

    ``config`` (the tool names in force) goes into a JSON data block, which is never executed."""
    style = (_VIEWS / "review.css").read_text(encoding="utf-8")
    script = (_VIEWS / "review.js").read_text(encoding="utf-8")
    if "</script" in script.lower() or "</style" in style.lower():
        raise ValueError("the view's script or style would end its own element")
    data = json.dumps(dict(config)).replace("<", "\\u003c")  # no "</script>" out of a tool name
    csp = "; ".join(
        (
            "default-src 'none'",
            f"script-src {_sha256(script)}",
            f"style-src {_sha256(style)}",
            "img-src data:",
            "font-src 'none'",
            "connect-src 'none'",
            "frame-src 'none'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        )
    )
    page = (_VIEWS / "review.html").read_text(encoding="utf-8")
    for name, value in (("csp", csp), ("config", data), ("style", style), ("script", script)):
        page = page.replace("{{" + name + "}}", value, 1)
    return page


class ImportReviewApp:
    """The SDK's Apps extension for the review view, and what applying it to the server means."""

    def __init__(self, tools: Mapping[str, Tool], *, prefix: str, server_name: str) -> None:
        self.view_uri = f"ui://{server_name}/import-review"
        self.extension = Apps()
        for base in VIEW_TOOLS:
            tool = tools[prefix + base]
            self.extension.tool(resource_uri=self.view_uri, name=tool.name)(tool.run)
        config = {"version": __version__, "tools": {base: prefix + base for base in CALLED_TOOLS}}
        self.extension.add_html_resource(
            self.view_uri,
            render_view(config),
            name="import-review",
            title="Import review",
            description="An import before it commits: records, missing values, the question, the outcome.",
            csp=ResourceCsp(),  # no domain at all: no connection, no script, style or font from outside
            prefers_border=True,
        )
        # Consumed as MCPServer consumes an additive extension: tool bindings and resources.
        self._tool_meta = {binding.kwargs["name"]: binding.meta or {} for binding in self.extension.tools()}
        self._resources: dict[str, Resource] = {
            str(binding.resource.uri): binding.resource for binding in self.extension.resources()
        }

    def apply(self, server: Server[Any]) -> None:
        """Advertise the extension (``capabilities.extensions``), in both eras."""
        server.extensions[self.extension.identifier] = self.extension.settings()

    def present(
        self, ctx: ServerRequestContext[Any, Any], definitions: Sequence[ToolDefinition]
    ) -> list[ToolDefinition]:
        """The tool list a request gets: ``_meta.ui`` on the view's tools, if it declared Apps."""
        if not client_supports_apps(ctx):
            return list(definitions)
        return [
            d.model_copy(update={"meta": {**(d.meta or {}), **self._tool_meta[d.name]}})
            if d.name in self._tool_meta
            else d
            for d in definitions
        ]

    def serves(self, uri: str) -> bool:
        return uri in self._resources or (uri.startswith(_IMPORT) and REVIEW_SUFFIX in uri)

    async def read(
        self,
        ctx: ServerRequestContext[Any, Any],
        uri: str,
        principal: Callable[[], Principal],
        service: ImportService,
    ) -> ReadResourceResult:
        """The view or an import's review, for a request that declared the extension."""
        if not client_supports_apps(ctx):
            raise _not_found(uri)
        view = self._resources.get(uri)
        if view is not None:
            text = await view.read()
            meta = view.meta
            contents = TextResourceContents(uri=uri, mime_type=APP_MIME_TYPE, text=str(text), _meta=meta)
            return ReadResourceResult(contents=[contents], ttl_ms=3_600_000, cache_scope="public")
        handle, after, size = _review_address(uri)
        try:
            review = await run_in_thread(service.review, principal(), handle, after=after, size=size)
        except HandleNotFound:
            raise _not_found(uri) from None
        except InvalidRequest as exc:
            raise MCPError(INVALID_PARAMS, exc.message, data={"uri": uri}) from None
        text = json.dumps(review_body(review))
        contents = TextResourceContents(uri=uri, mime_type="application/json", text=text)
        return ReadResourceResult(contents=[contents], ttl_ms=0, cache_scope="private")


def _not_found(uri: str) -> MCPError:
    return MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri})


def _review_address(uri: str) -> tuple[str, int, int]:
    """``import://{handle}/review?after=N&size=M`` -> (handle, N, M); -32602 for anything else."""
    parts = urlsplit(uri)
    if parts.scheme != "import" or parts.path != REVIEW_SUFFIX or parts.fragment:
        raise _not_found(uri)
    query = parse_qs(parts.query, keep_blank_values=True)
    if set(query) - {"after", "size"} or any(len(values) != 1 for values in query.values()):
        raise MCPError(INVALID_PARAMS, "a review takes after and size, once each", data={"uri": uri})
    try:
        after = int(query.get("after", ["0"])[0])
        size = int(query.get("size", ["20"])[0])
    except ValueError:
        raise MCPError(INVALID_PARAMS, "after and size are whole numbers", data={"uri": uri}) from None
    return parts.netloc, after, size


def review_body(review: ImportReview) -> dict[str, Any]:
    """The review as the view reads it (JSON)."""
    view, target, page, question = review.view, review.target, review.page, review.question
    commits = [o for o in view.operations if o.kind == "commit"]
    return {
        "handle": view.handle,
        "import_id": view.import_id,
        "status": view.status,
        "target": view.target,
        "target_description": target.description if target is not None else None,
        "target_schema": dict(target.schema) if target is not None else None,
        "record_count": view.record_count,
        "reviewed_count": review.reviewed_count,
        "expires_at": view.expires_at.isoformat(),
        "legacy_batch_id": view.legacy_batch_id,
        "page": {
            "after": page.after,
            "size": page.size,
            "records": [{"seq": r.seq, "record": r.record} for r in page.records],
            "next_after": page.next_after,
        },
        "fields_from": review.fields_from,
        "missing": [{"field": c.field, "missing": c.missing} for c in review.missing],
        "question": None
        if question is None
        else {
            "purpose": question.purpose,
            "text": question.text,
            "record_count": question.record_count,
            "content_digest": question.content_digest,
            "legacy_batch_id": question.legacy_batch_id,
        },
        "content_digest": review.content_digest,
        "commit": {"operation_id": commits[-1].operation_id, "status": commits[-1].status}
        if commits
        else None,
    }
