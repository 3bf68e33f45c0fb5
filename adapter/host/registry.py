"""The federation registry: capabilities keyed by (server identity, capability name).

Two servers may both offer ``commit_import``; the registry keeps them apart under qualified names
(``server.tool``) and optional product aliases that always map back to their origin. A rediscovery is
diffed, not blindly applied: a tool whose description or schema changed needs approval again before it
is offered, and a server that is down has its tools taken out of the active set until a probe sees it
back.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from mcp_types import Tool

from adapter.host.errors import UnknownCapability

__all__ = ["CapabilityKey", "Diff", "Entry", "Registry", "fingerprint"]


@dataclass(frozen=True, order=True)
class CapabilityKey:
    server: str
    name: str

    @property
    def qualified(self) -> str:
        return f"{self.server}.{self.name}"


def fingerprint(tool: Tool) -> str:
    """A digest of the contract the host approved: name, description, schemas and hints."""
    contract = tool.model_dump(
        mode="json",
        by_alias=True,
        exclude_none=True,
        include={"name", "title", "description", "input_schema", "output_schema", "annotations"},
    )
    return hashlib.sha256(json.dumps(contract, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Entry:
    """One capability as discovered. ``changed``: approval was dropped because its contract changed."""

    key: CapabilityKey
    tool: Tool
    fingerprint: str
    approved: bool
    changed: bool = False

    @property
    def qualified(self) -> str:
        return self.key.qualified


@dataclass(frozen=True)
class Diff:
    added: tuple[CapabilityKey, ...]
    removed: tuple[CapabilityKey, ...]
    changed: tuple[CapabilityKey, ...]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


@dataclass
class Registry:
    """Entries by key, the servers currently reachable, and product aliases (``alias -> key``)."""

    entries: dict[CapabilityKey, Entry] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    aliases: dict[str, CapabilityKey] = field(default_factory=dict)

    def apply(self, server: str, tools: list[Tool], *, auto_approve: set[str] | None) -> Diff:
        """Replace ``server``'s entries with a fresh discovery and say what changed.

        New tools are approved when ``auto_approve`` (the allowlist; None means all) names them; a
        changed contract is never approved automatically.
        """
        old = {key: entry for key, entry in self.entries.items() if key.server == server}
        new = {CapabilityKey(server, tool.name): tool for tool in tools}
        added, changed = [], []
        for key, tool in new.items():
            digest = fingerprint(tool)
            before = old.get(key)
            if before is None:
                added.append(key)
                approved, pending_change = auto_approve is None or key.name in auto_approve, False
            elif before.fingerprint != digest:
                changed.append(key)
                approved, pending_change = False, True
            else:
                approved, pending_change = before.approved, before.changed
            self.entries[key] = Entry(key, tool, digest, approved, pending_change)
        removed = sorted(set(old) - set(new))
        for key in removed:
            del self.entries[key]
        self.down.discard(server)
        return Diff(tuple(sorted(added)), tuple(removed), tuple(sorted(changed)))

    def approve(self, qualified: str, fingerprint_seen: str) -> None:
        """Approve the contract the user saw; a newer contract than that one stays unapproved."""
        entry = self._lookup(qualified)
        if entry.fingerprint == fingerprint_seen:
            entry.approved, entry.changed = True, False

    def alias(self, alias: str, qualified: str) -> None:
        self.aliases[alias] = self._lookup(qualified).key

    def mark_down(self, server: str) -> None:
        self.down.add(server)

    def active(self) -> list[Entry]:
        """What may be offered right now: approved entries of reachable servers."""
        return sorted(
            (e for e in self.entries.values() if e.approved and e.key.server not in self.down),
            key=lambda e: e.key,
        )

    def resolve(self, name: str) -> Entry:
        """The active entry for a qualified name or alias; raises :class:`UnknownCapability`."""
        entry = self._lookup(name)
        if entry.key.server in self.down:
            raise UnknownCapability(f"{entry.qualified}: server {entry.key.server!r} is unreachable")
        if not entry.approved and entry.changed:
            raise UnknownCapability(f"{entry.qualified}: its contract changed and awaits approval")
        if not entry.approved:
            raise UnknownCapability(
                f"{entry.qualified}: not approved (off the host's allowlist, or new and awaiting approval)"
            )
        return entry

    def _lookup(self, name: str) -> Entry:
        key = self.aliases.get(name)
        if key is None:
            server, dot, tool = name.partition(".")
            key = CapabilityKey(server, tool) if dot else None
        entry = self.entries.get(key) if key is not None else None
        if entry is None:
            raise UnknownCapability(f"no capability {name!r}")
        return entry
