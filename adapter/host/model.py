"""Handing tools to a model: the model APIs' tool formats, and the way back to the qualified origin.

Model APIs name tools by ``^[a-zA-Z0-9_-]{1,64}$``; ``eu.commit_import`` breaks that rule. A
:class:`ModelToolset` is a snapshot of what one principal may be offered now (``host.active``):
each tool gets a model name that fits the rule (``eu__commit_import``; cut and suffixed with a digest
of the qualified name when too long or clashing) and maps back to exactly one origin and the contract
fingerprint it was offered under. The formats: OpenAI chat completions and responses, Anthropic
messages, Gemini function declarations, and a plain one (name, description, JSON schema) for
frameworks that take a schema.

The way back is where policy applies again: :meth:`ModelToolset.invoke` resolves the model's name to
the origin, refuses a name the snapshot never offered, and calls through the host, which resolves the
capability and checks policy *now* (a name once visible in context is no lasting permission); a tool
whose contract changed since the snapshot is refused, not called under the old description. The
result comes back shaped for the model (:mod:`adapter.host.context`): every content block kept within
the server's limits, marked untrusted with its origin; refusals and outcomes say what happened in
words a model can act on, and an unknown outcome never reads as a failure.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from adapter.host.connection import Principal
from adapter.host.context import ContextItem, ContextPolicy, Origin
from adapter.host.errors import HostError
from adapter.host.lifecycle import Call, CallState

if TYPE_CHECKING:
    from adapter.host.host import Host

__all__ = ["MODEL_NAME", "ModelResult", "ModelTool", "ModelToolset", "model_name"]

MODEL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def model_name(qualified: str, taken: set[str]) -> str:
    """A name for the model that fits its rule, is not in ``taken``, and is derived from the origin."""
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", qualified.replace(".", "__", 1))
    if MODEL_NAME.match(name) and name not in taken:
        return name
    digest = hashlib.sha256(qualified.encode()).hexdigest()[:8]
    return f"{name[:55]}_{digest}"


@dataclass(frozen=True)
class ModelTool:
    name: str
    qualified: str
    fingerprint: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelResult:
    """What goes back to the model for one proposal, and the call (or refusal) behind it."""

    text: str
    origin: str  # the qualified tool the model's name mapped to ("" when it mapped to none)
    call: Call | None = None
    item: ContextItem | None = None
    refused: str | None = None


@dataclass
class ModelToolset:
    host: Host
    principal: Principal
    context: ContextPolicy = field(default_factory=ContextPolicy)
    tools: dict[str, ModelTool] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        taken: set[str] = set()
        for entry in self.host.active(self.principal):
            name = model_name(entry.qualified, taken)
            taken.add(name)
            description = (
                f"[from server {entry.key.server}] {entry.tool.description or entry.tool.title or ''}"
            )
            parameters = dict(entry.tool.input_schema or {"type": "object"})
            self.tools[name] = ModelTool(
                name, entry.qualified, entry.fingerprint, description.strip(), parameters
            )

    def origin(self, name: str) -> str:
        """The qualified origin of a model name; raises :class:`HostError` for a name never offered."""
        tool = self.tools.get(name)
        if tool is None:
            raise HostError(f"the model named a tool that was not offered: {name!r}")
        return tool.qualified

    # --- the formats --------------------------------------------------------------------------

    def plain(self) -> list[dict[str, Any]]:
        return [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in self.tools.values()
        ]

    def openai_chat(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": tool} for tool in self.plain()]

    def openai_responses(self) -> list[dict[str, Any]]:
        return [{"type": "function", **tool} for tool in self.plain()]

    def anthropic(self) -> list[dict[str, Any]]:
        return [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in self.tools.values()
        ]

    def gemini(self) -> dict[str, Any]:
        return {"function_declarations": self.plain()}

    # --- the way back -------------------------------------------------------------------------

    async def invoke(self, name: str, arguments: dict[str, Any] | None = None) -> ModelResult:
        """Run the model's proposal: origin first, policy again, then the call; never raises for a
        refusal (the model reads why)."""
        tool = self.tools.get(name)
        if tool is None:
            return self._refuse("", name, "that tool was not offered")
        try:
            current = self.host.registry.resolve(tool.qualified)
        except HostError as exc:
            return self._refuse(tool.qualified, name, str(exc))
        if current.fingerprint != tool.fingerprint:
            return self._refuse(tool.qualified, name, "its contract changed since it was offered")
        try:
            call = await self.host.call(self.principal, tool.qualified, dict(arguments or {}))
        except HostError as exc:
            return self._refuse(tool.qualified, name, str(exc))
        return self.shape(call)

    def _refuse(self, qualified: str, name: str, why: str) -> ModelResult:
        self.context.refused(qualified.split(".", 1)[0] if qualified else "(none)")
        return ModelResult(f"The host did not run {name}: {why}.", qualified, refused=why)

    def shape(self, call: Call) -> ModelResult:
        rule = self.host.policy.rule(call.server)
        origin = Origin(
            call.server,
            "tool_result",
            call.qualified,
            call.principal,
            call.call_id,
            call.fingerprint,
            rule.trust.value,
        )
        item = self.context.admit(origin, call.content, rule.trust, call.structured)
        outcome = {
            CallState.COMPLETED: "completed",
            CallState.FAILED: f"failed: {call.error or 'the server refused it'}",
            CallState.CANCELLED: "cancelled; nothing more will happen",
            CallState.OUTCOME_UNKNOWN: "outcome unknown: it may have taken effect; do not call it again, "
            "the host will check its status",
            CallState.RUNNING: "still running on the server; do not call it again",
        }.get(call.state, call.state.value)
        text = (
            f"{call.qualified} {outcome}.\n{item.as_text()}"
            if item.blocks
            else f"{call.qualified} {outcome}."
        )
        return ModelResult(text, call.qualified, call, item)

    def instructions(self) -> list[ContextItem]:
        """The servers' instructions, admitted as untrusted context with their origin."""
        items = []
        for found in self.host.instructions(self.principal):
            rule = self.host.policy.rule(found.server)
            origin = Origin(
                found.server, "instructions", "instructions", self.principal.id, trust=rule.trust.value
            )
            items.append(self.context.admit(origin, [{"type": "text", "text": found.text}], rule.trust))
        return items
