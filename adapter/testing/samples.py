"""Records that satisfy a target's JSON Schema, for the port contract checks.

Enough of JSON Schema for records of database tables and pydantic models: objects with typed
properties, ``default`` and ``examples`` (a field's or a whole record's: the way to satisfy a
``pattern``), ``anyOf``/``oneOf`` (the first non-null branch), ``$ref`` into ``$defs``, ``enum``,
``const``, string formats ``date`` and ``date-time``, and length and range bounds. Values differ
per record and per run (a random base), so unique columns and primary keys do not collide when the
check runs again against the same system. A schema outside that subset can be served by your own
records: define ``contract_records(self, start, count)`` in your :class:`adapter.testing.PortContract`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

__all__ = ["sample_records"]


def sample_records(
    schema: Mapping[str, Any], start: int, count: int, *, salt: int | None = None
) -> list[Any]:
    """``count`` records numbered from ``start``; ``salt`` (random by default) keeps runs apart."""
    base = secrets.randbelow(10**6) * 1000 if salt is None else salt
    defs = dict(schema.get("$defs", {}))
    return [_value(schema, base + start + i, defs) for i in range(count)]


def _value(schema: Mapping[str, Any], n: int, defs: dict[str, Any]) -> Any:
    if "$ref" in schema:
        return _value(defs[str(schema["$ref"]).rsplit("/", 1)[-1]], n, defs)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    if schema.get("examples"):  # the schema's own examples (JSON Schema "examples"), in turn
        examples = schema["examples"]
        return examples[n % len(examples)]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return _value(options[0], n, defs)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties: Mapping[str, Any] = schema.get("properties", {})
        if not properties and schema.get("additionalProperties", True) is not False:
            return {"n": n}
        return {name: _value(sub, n, defs) for name, sub in properties.items()}
    if kind == "integer":
        return _bounded(n, schema)
    if kind == "number":
        return float(_bounded(n, schema)) + 0.5 if "maximum" not in schema else float(_bounded(n, schema))
    if kind == "boolean":
        return n % 2 == 0
    if kind == "array":
        return []
    if kind == "null":
        return None
    return _string(n, schema)


def _bounded(n: int, schema: Mapping[str, Any]) -> int:
    low = int(schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    value = max(n, low)
    if high is not None:
        span = int(high) - low
        value = low + (n % span if span > 0 else 0)
    return value


def _string(n: int, schema: Mapping[str, Any]) -> str:
    if schema.get("format") == "date":
        return f"20{n % 30:02d}-{n % 12 + 1:02d}-{n % 28 + 1:02d}"
    if schema.get("format") == "date-time":
        return f"20{n % 30:02d}-{n % 12 + 1:02d}-{n % 28 + 1:02d}T12:00:00+00:00"
    text = f"r{n}"
    longest = schema.get("maxLength")
    if longest is not None:
        text = text[-int(longest) :] if int(longest) > 0 else ""
    return text.ljust(int(schema.get("minLength", 0)), "x")
