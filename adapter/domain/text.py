"""Text every database can store: no NUL (PostgreSQL refuses it) and no lone surrogate (not UTF-8).

JSON allows both (``"\\u0000"``, ``"\\ud800"``), so a client can send them; left alone they fail deep
in the store or the hashing as an internal error. Checked at the service boundary instead, they are
an ordinary ``validation_error`` that names the field, never the value.
"""

from __future__ import annotations

from collections.abc import Iterable

from adapter.domain.errors import InvalidRequest

__all__ = ["is_storable", "require_storable"]


def is_storable(value: str) -> bool:
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def require_storable(**fields: str | None) -> None:
    """InvalidRequest naming the first field whose text cannot be stored (None and non-text pass)."""
    for name, value in fields.items():
        if isinstance(value, str) and not is_storable(value):
            raise InvalidRequest(f"{name} contains a NUL character or a lone surrogate")


def require_storable_values(what: str, values: Iterable[object]) -> None:
    for value in values:
        if isinstance(value, str) and not is_storable(value):
            raise InvalidRequest(f"{what} contains a NUL character or a lone surrogate")
