"""How the server presents the wrapped system: its targets, its name, its tool names.

A model must learn each target's record shape before it adds records, so the shapes are published
in three places (``docs/wrap-your-own-system.md``, "What the model sees"):

* ``begin_import``'s description lists the targets (with their schemas inline while they are small)
  and its ``target`` input lists the names as an ``enum`` when the port accepts no others;
* ``add_record`` and ``add_records`` say that every record is checked against its target's schema;
* the resource ``targets://`` holds every target with its JSON Schema, ``targets://{name}`` one.

A tool-name prefix (``ADAPTER_TOOL_PREFIX=erp_``) renames every tool and every mention of one in
descriptions and instructions, so two wrapped systems in one host stay apart.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import ConfigDict

from adapter.config import Settings
from adapter.entrypoints.mcp import schemas as s
from adapter.entrypoints.mcp.tools import Tool
from adapter.ports.legacy import WILDCARD_TARGET, Target
from adapter.services.targets import TargetRules

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "TARGETS_URI",
    "instructions",
    "present_tools",
    "read_targets",
    "targets_summary",
]

TARGETS_URI = "targets://"
_INLINE_SCHEMAS_MAX = 3000  # characters of schemas inlined in begin_import's description
_TOOL_NAMES = (
    "begin_import",
    "add_records",
    "add_record",
    "commit_import",
    "abort_import",
    "get_import_status",
    "get_operation_status",
)
_MENTION = re.compile(r"\b(" + "|".join(_TOOL_NAMES) + r")\b")

DEFAULT_INSTRUCTIONS = (
    "Imports into a legacy system are explicit transactions: call begin_import to get a handle, stage "
    "records with add_record or add_records, then commit_import. Pass an idempotency_key on every call "
    "you might retry. If a commit reports outcome_unknown, do not commit again: read get_operation_status "
    "or the import://{handle} resource until it is resolved. Each target's record shape (a JSON Schema) "
    "is in the targets:// resource; records that do not match it are refused. Listen streams are not "
    "replayed: after a lost stream, listen again and re-read resources/list and the resources you follow."
)


def _renamed(text: str, prefix: str) -> str:
    return _MENTION.sub(lambda m: prefix + m.group(1), text) if prefix else text


def instructions(settings: Settings) -> str:
    return _renamed(settings.server_instructions or DEFAULT_INSTRUCTIONS, settings.tool_prefix)


def _target_line(target: Target) -> str:
    if target.name == WILDCARD_TARGET:
        return f"- any other name: {target.description or 'any JSON object'}"
    line = f"- {target.name}" + (f": {target.description}" if target.description else "")
    return line + (f" (at most {target.max_records} records per import)" if target.max_records else "")


def targets_summary(rules: TargetRules) -> str:
    """The targets as begin_import's description lists them."""
    lines = [_target_line(t) for t in rules.targets]
    schemas = {t.name: t.schema for t in rules.targets if t.name != WILDCARD_TARGET}
    text = "Targets:\n" + "\n".join(lines)
    inline = json.dumps(schemas, separators=(",", ":"))
    if schemas and len(inline) <= _INLINE_SCHEMAS_MAX:
        return text + "\nJSON Schema of one record, per target: " + inline
    return text + "\nThe JSON Schema of one record of each target is in the resource targets://{name}."


def _begin_input_model(rules: TargetRules) -> type[s.BeginImportIn]:
    """BeginImportIn whose published schema lists the target names (validation is the service's)."""
    names = rules.names()

    def extra(schema: dict[str, Any]) -> None:
        target = schema["properties"]["target"]
        target["description"] = "One of the targets listed in this tool's description."
        if rules.closed and names:
            target["enum"] = names

    return type("BeginImportIn", (s.BeginImportIn,), {"model_config": ConfigDict(json_schema_extra=extra)})


def present_tools(tools: Iterable[Tool], rules: TargetRules, prefix: str) -> list[Tool]:
    """The tools as this server publishes them: targets described, names prefixed."""
    presented: list[Tool] = []
    for tool in tools:
        description = tool.description
        input_model = tool.input_model
        if tool.name == "begin_import":
            description += "\n" + targets_summary(rules)
            input_model = _begin_input_model(rules)
        elif tool.name in ("add_record", "add_records"):
            description += (
                " Every record is checked against its import's target schema (targets://{target}) "
                "before it is staged; a mismatch names the record's index and field and stages nothing."
            )
        presented.append(
            dataclasses.replace(
                tool,
                name=prefix + tool.name,
                description=_renamed(description, prefix),
                input_model=input_model,
            )
        )
    return presented


def _target_body(target: Target) -> dict[str, Any]:
    return {
        "name": target.name,
        "description": target.description,
        "schema": dict(target.schema),
        "max_records": target.max_records,
    }


def read_targets(rules: TargetRules, uri: str) -> str | None:
    """The JSON text of ``targets://`` (all) or ``targets://{name}`` (one); None if there is none."""
    name = uri[len(TARGETS_URI) :]
    if not name:
        return json.dumps({"targets": [_target_body(t) for t in rules.targets]})
    target = rules.get(name)
    return None if target is None else json.dumps(_target_body(target))
