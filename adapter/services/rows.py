"""Result values copied from stored rows, column by column.

Most fields of a result value (an operator's :class:`OperationRecord`, a caller's
:class:`OperationView`) are the row's column of the same name; :func:`from_row` copies those, so a
mapping lists only what differs: a renamed column (``operation_id`` is the row's ``id``) or a value
computed elsewhere (the history, the audit trail).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar, cast

__all__ = ["from_row"]

V = TypeVar("V")


def from_row(value: type[V], row: object, renamed: Mapping[str, str] | None = None, **given: Any) -> V:
    """A ``value`` (a dataclass) whose fields are ``given``, else the row's column ``renamed[field]``,
    else the row's column of the field's name."""
    names = renamed or {}
    copied = {
        f.name: getattr(row, names.get(f.name, f.name))
        for f in fields(cast(Any, value))
        if f.init and f.name not in given
    }
    return value(**copied, **given)
