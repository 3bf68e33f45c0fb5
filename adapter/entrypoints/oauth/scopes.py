"""Which scope each MCP request needs: one small table, keyed by the tool's base name.

Four scopes, each named by a setting (``ADAPTER_OAUTH_SCOPE_READ`` / ``_WRITE`` / ``_COMMIT`` /
``_ABORT``; ``imports:read`` ... by default), are what the protected-resource metadata lists in
``scopes_supported``:

* **read**: ``get_import_status``, ``get_operation_status``, the resources and listen streams;
* **write**: staging, ``begin_import``, ``add_record``, ``add_records``;
* **commit**: ``commit_import``;
* **abort**: ``abort_import`` (which also compensates a committed import).

A request that needs none of them (``server/discover``, ``initialize``, ``tools/list``,
``prompts/*``, ``ping``, notifications) still needs a valid token for this server. There are no
implied scopes: ``imports:commit`` does not include ``imports:write``.

Adding a tool: add its base name to :data:`TOOL_NEEDS` (a published tool missing from it stops the
server at start-up, so none is left unguarded). Adding a method with an effect: add it to
:data:`METHOD_NEEDS`. The Tasks extension's methods are mapped already: a task follows the commit
that started it, so ``tasks/*`` need the commit scope (change it there if tasks come to follow other
tools too).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from adapter.config import Settings

__all__ = ["METHOD_NEEDS", "TOOL_NEEDS", "Need", "ScopePolicy"]

Need = Literal["read", "write", "commit", "abort"]

TOOL_NEEDS: dict[str, Need] = {
    "begin_import": "write",
    "add_record": "write",
    "add_records": "write",
    "replace_records": "write",
    "commit_import": "commit",
    "abort_import": "abort",
    "get_import_status": "read",
    "get_operation_status": "read",
}
"""Tool base name (without ``ADAPTER_TOOL_PREFIX``) -> what calling it needs."""

METHOD_NEEDS: dict[str, Need] = {
    "resources/list": "read",
    "resources/read": "read",
    "resources/templates/list": "read",
    "resources/subscribe": "read",
    "resources/unsubscribe": "read",
    "subscriptions/listen": "read",
    # The Tasks extension (io.modelcontextprotocol/tasks): a task follows the commit that started it.
    "tasks/get": "commit",
    "tasks/update": "commit",
    "tasks/cancel": "commit",
}
"""JSON-RPC method -> what it needs (``tools/call`` goes by the tool; unlisted methods need none)."""

LEGACY_STREAM_NEED: Need = "read"
"""A 2025-era ``GET /mcp``: the session's notification stream (resource updates) is a read."""


@dataclass(frozen=True, slots=True)
class ScopePolicy:
    """The table above with this deployment's scope names and tool names."""

    names: dict[Need, str]
    tools: dict[str, str]  # published tool name -> scope

    @classmethod
    def from_settings(cls, settings: Settings, published_tools: Iterable[str]) -> ScopePolicy:
        names: dict[Need, str] = {
            "read": settings.oauth_scope_read,
            "write": settings.oauth_scope_write,
            "commit": settings.oauth_scope_commit,
            "abort": settings.oauth_scope_abort,
        }
        tools: dict[str, str] = {}
        for published in published_tools:
            base = published.removeprefix(settings.tool_prefix)
            if base not in TOOL_NEEDS:
                raise RuntimeError(
                    f"tool {published!r} has no scope: add it to TOOL_NEEDS in "
                    "adapter/entrypoints/oauth/scopes.py"
                )
            tools[published] = names[TOOL_NEEDS[base]]
        return cls(names=names, tools=tools)

    @property
    def supported(self) -> list[str]:
        """Every scope, in a fixed order (the metadata's ``scopes_supported``), once each."""
        return list(dict.fromkeys(self.names.values()))

    @property
    def minimum(self) -> str:
        """What a request that needs no particular scope asks for in its 401: reading, the least."""
        return self.names["read"]

    def needed(self, method: str | None, name: str | None) -> str | None:
        """The scope one JSON-RPC request needs, or None (a valid token is enough).

        An unknown tool needs nothing here: the server answers it with "Unknown tool".
        """
        if method == "tools/call":
            return self.tools.get(name) if name is not None else None
        need = METHOD_NEEDS.get(method) if method is not None else None
        return self.names[need] if need is not None else None

    def for_legacy_stream(self) -> str:
        return self.names[LEGACY_STREAM_NEED]
