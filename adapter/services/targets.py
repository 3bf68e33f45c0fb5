"""The targets of the wrapped system as the service layer enforces them.

Each target's record schema is compiled once, at start-up, with ``jsonschema_rs`` (a compiled
JSON Schema validator: about 0.2 us per small record, against 0.7 us for ``fastjsonschema`` and
0.75 us for a pydantic ``TypeAdapter``; see ``bench/RESULTS.md``), so validating every record of a
1000-record ``add`` costs well under a millisecond. Only a failing record pays for the detailed error.

Messages name the record's index, the field and the rule it breaks, never the value sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from adapter.domain.errors import InvalidRequest, LimitExceeded
from adapter.ports.legacy import WILDCARD_TARGET, Target

__all__ = ["CompiledTarget", "RecordInvalid", "TargetRules", "UnknownTarget"]

_MAX_NAME = 60  # field names come from the client: keep them short in messages


class UnknownTarget(InvalidRequest):
    code = "unknown_target"


class RecordInvalid(InvalidRequest):
    """A record does not match its target's schema; ``index`` and ``field`` say where."""

    def __init__(self, index: int, field: str, rule: str) -> None:
        where = f"field '{field}'" if field else "the record"
        super().__init__(f"record {index}: {where} {rule}")
        self.index, self.field, self.rule = index, field, rule


@dataclass(frozen=True, slots=True)
class CompiledTarget:
    target: Target
    validator: jsonschema_rs.Validator
    permissive: bool

    def check(self, records: Sequence[Any], already: int = 0) -> None:
        """Raise :class:`RecordInvalid` for the first record that breaks the schema."""
        limit = self.target.max_records
        if limit is not None and already + len(records) > limit:
            raise LimitExceeded(f"an import into '{self.target.name}' holds at most {limit} records")
        if self.permissive:
            return
        is_valid = self.validator.is_valid
        for index, record in enumerate(records):
            if not is_valid(record):
                raise _explain(index, next(iter(self.validator.iter_errors(record))))


def _short(name: object) -> str:
    text = str(name)
    return text if len(text) <= _MAX_NAME else text[: _MAX_NAME - 1] + "…"


def _explain(index: int, error: Any) -> RecordInvalid:
    """Name the field and the broken rule from the error's paths, without echoing the value."""
    kind = error.kind
    path = ".".join(_short(part) for part in error.instance_path)
    keyword = str(error.schema_path[-1]) if len(error.schema_path) else "schema"
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
        field = f"{path}.{_short(kind.property)}" if path else _short(kind.property)
        return RecordInvalid(index, field, "is required")
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
        unexpected = ", ".join(_short(name) for name in list(kind.unexpected)[:5])
        return RecordInvalid(index, path, f"has fields the target does not know: {unexpected}")
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Type):
        names = sorted((str(t) for t in getattr(kind, "types", ())), key=lambda t: (t == "null", t))
        expected = "/".join(names) or "another type"
        return RecordInvalid(index, path, f"must be of type {expected}")
    return RecordInvalid(index, path, f"breaks the schema rule '{keyword}'")


class TargetRules:
    """The compiled targets of one port; built once by ``adapter.bootstrap``."""

    def __init__(self, targets: Iterable[Target]) -> None:
        self._by_name: dict[str, CompiledTarget] = {}
        self._wildcard: CompiledTarget | None = None
        for target in targets:
            compiled = CompiledTarget(
                target,
                jsonschema_rs.validator_for(dict(target.schema)),
                permissive=dict(target.schema) == {"type": "object"},
            )
            if target.name == WILDCARD_TARGET:
                self._wildcard = compiled
            else:
                self._by_name[target.name] = compiled
        self.targets: tuple[Target, ...] = tuple(c.target for c in self._by_name.values()) + (
            (self._wildcard.target,) if self._wildcard else ()
        )

    @property
    def closed(self) -> bool:
        """True when only the declared names are accepted (no ``*`` target)."""
        return self._wildcard is None

    def names(self) -> list[str]:
        return list(self._by_name)

    def get(self, name: str) -> Target | None:
        found = self._by_name.get(name) or self._wildcard
        return found.target if found else None

    def require(self, name: str) -> CompiledTarget:
        """The target ``name`` refers to; :class:`UnknownTarget` if the port does not accept it."""
        found = self._by_name.get(name) or self._wildcard
        if found is None:
            known = ", ".join(sorted(self._by_name)[:20])
            raise UnknownTarget(f"unknown target '{_short(name)}'; this system accepts: {known}")
        return found
