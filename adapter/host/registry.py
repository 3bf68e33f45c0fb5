"""The federation registry: capabilities keyed by (server identity, capability name).

Two servers may both offer ``commit_import``; the registry keeps them apart under qualified names
(``server.tool``) and optional product aliases that always map back to their origin. A rediscovery is
diffed, not blindly applied: a tool whose description or schema changed needs approval again before it
is offered, and a server that is down has its tools taken out of the active set until a probe sees it
back.

A tool's fingerprint covers its whole contract as the server declared it (every field, ``_meta``,
``icons`` and ``execution`` included, and fields this SDK does not know yet): a change anywhere is
a change to approve. Aliases are a presentation layer: they never contain a dot, so they can never
shadow a qualified name, and each maps to exactly one origin.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from mcp_types import Tool

from adapter.host.errors import UnknownCapability

__all__ = ["CapabilityKey", "Diff", "Entry", "Registry", "contract_fingerprint", "fingerprint"]


@dataclass(frozen=True, order=True)
class CapabilityKey:
    server: str
    name: str

    @property
    def qualified(self) -> str:
        return f"{self.server}.{self.name}"


def fingerprint(tool: Tool) -> str:
    """A digest of the contract the host approved: the whole tool as declared, unknown fields too."""
    contract = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return hashlib.sha256(json.dumps(contract, sort_keys=True).encode()).hexdigest()[:16]


def contract_fingerprint(tools: list[Tool], capabilities: dict[str, object] | None = None) -> str:
    """A digest of a server's whole contract: every tool's fingerprint and its declared capabilities.

    Kept per server id as a check on its identity: a server at the configured URL showing another
    contract than the one pinned for it is diffed and re-approved, never taken as the same.
    """
    parts = {"tools": sorted(fingerprint(t) for t in tools), "capabilities": capabilities or {}}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


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
    contract: str = ""  # the server's contract fingerprint after this discovery
    previous_contract: str | None = None  # before it (None: first contact)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


@dataclass
class Registry:
    """Entries by key, the servers currently reachable, and product aliases (``alias -> key``)."""

    entries: dict[CapabilityKey, Entry] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    aliases: dict[str, CapabilityKey] = field(default_factory=dict)
    contracts: dict[str, str] = field(default_factory=dict)  # server id -> contract fingerprint

    def apply(
        self,
        server: str,
        tools: list[Tool],
        *,
        auto_approve: set[str] | None,
        capabilities: dict[str, object] | None = None,
    ) -> Diff:
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
        previous = self.contracts.get(server)
        self.contracts[server] = contract_fingerprint(tools, capabilities)
        return Diff(
            tuple(sorted(added)), tuple(removed), tuple(sorted(changed)), self.contracts[server], previous
        )

    def approve(self, qualified: str, fingerprint_seen: str) -> None:
        """Approve the contract the user saw; a newer contract than that one stays unapproved."""
        entry = self._lookup(qualified)
        if entry.fingerprint == fingerprint_seen:
            entry.approved, entry.changed = True, False

    def alias(self, alias: str, qualified: str) -> None:
        """A product name for one origin. It may not contain a dot (qualified names do, so an alias can
        never shadow one) and may not be re-pointed at another origin."""
        if not alias or "." in alias:
            raise ValueError(f"alias {alias!r} must be non-empty and contain no '.'")
        key = self._lookup(qualified).key
        if self.aliases.get(alias, key) != key:
            raise ValueError(f"alias {alias!r} already names {self.aliases[alias].qualified}")
        self.aliases[alias] = key

    def alias_of(self, key: CapabilityKey) -> str | None:
        return next((alias for alias, target in self.aliases.items() if target == key), None)

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
        server, dot, tool = name.partition(".")
        key = CapabilityKey(server, tool) if dot else self.aliases.get(name)
        entry = self.entries.get(key) if key is not None else None
        if entry is None:
            raise UnknownCapability(f"no capability {name!r}")
        return entry
