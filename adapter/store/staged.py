"""Staged records as the store keeps them: one chunk per add, and the read that walks them in order.

An add's records are one row (``StagedChunkRow``): their compact JSON texts joined by newlines, at
positions ``first_seq .. last_seq`` of the import. Compact JSON holds no raw newline (the encoder
escapes one inside a string and writes no whitespace between tokens, ``domain/records.py``), so
the texts split back exactly as they were stored, and ``[`` + the texts joined by commas + ``]`` is
the chunk as a JSON array: how SQL reads the records' fields (``review.py``).

Every read of records is a window of positions ``(after, upto]`` (:func:`staged_window`): the
commit's replay reads the import a window at a time, the review a page at a time. It is one
statement of two index range scans on ``(import_id, last_seq)``: the chunks that end inside the
window, and the first chunk that ends past it (it may start inside the window; its text is read only
then). So a window costs the chunks it covers, whatever the size of the import, and still says
whether the store holds anything past it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    Connection,
    Table,
    bindparam,
    case,
    func,
    literal,
    literal_column,
    select,
    union_all,
)

from adapter.store.tables import StagedChunkRow

__all__ = ["StagedWindow", "join_records", "records_array", "split_records", "staged_window"]

_SEPARATOR = "\n"

_chunks = cast(Table, StagedChunkRow.__table__)


def join_records(texts: Sequence[str]) -> str:
    """The stored text of a chunk of records (compact JSON texts, none holding a raw newline)."""
    return _SEPARATOR.join(texts)


def split_records(data: str) -> list[str]:
    """The records' JSON texts of a stored chunk, in order."""
    return data.split(_SEPARATOR)


def records_array(data: Any) -> Any:
    """SQL: a chunk's text (a column) as a JSON array of its records."""
    return literal("[") + func.replace(data, literal(_SEPARATOR), literal(",")) + literal("]")


@dataclass(frozen=True, slots=True)
class StagedWindow:
    """The staged records at positions ``after + 1 .. after + len(texts)``, in order, as stored.

    ``texts`` stops early where the store has no record at the next position (or, for a store
    changed behind the kit's back, two chunks claim it). ``beyond``: the store holds something the
    texts do not cover, past ``upto`` or past such a gap.
    """

    texts: list[str] = field(repr=False)
    beyond: bool


_import_id: BindParameter[str] = bindparam("import_id")
_after: BindParameter[int] = bindparam("after")
_upto: BindParameter[int] = bindparam("upto")
_ending_inside = select(_chunks.c.first_seq, _chunks.c.last_seq, _chunks.c.data).where(
    _chunks.c.import_id == _import_id, _chunks.c.last_seq > _after, _chunks.c.last_seq <= _upto
)
_ending_past = (
    select(
        _chunks.c.first_seq,
        _chunks.c.last_seq,
        case((_chunks.c.first_seq <= _upto, _chunks.c.data)).label("data"),
    )
    .where(_chunks.c.import_id == _import_id, _chunks.c.last_seq > _upto)
    .order_by(_chunks.c.last_seq)
    .limit(1)
    .subquery("ending_past")
)
_WINDOW = union_all(_ending_inside, select(_ending_past)).order_by(literal_column("last_seq"))


def staged_window(connection: Connection, import_id: str, after: int, upto: int) -> StagedWindow:
    """The records of ``import_id`` at positions ``after < seq <= upto`` (see :class:`StagedWindow`)."""
    rows = connection.execute(_WINDOW, {"import_id": import_id, "after": after, "upto": upto}).all()
    texts: list[str] = []
    for first_seq, last_seq, data in rows:
        expected = after + len(texts) + 1
        # Each chunk must start at the next position (the first may start before the window).
        if expected > upto or data is None or first_seq > expected or (texts and first_seq != expected):
            return StagedWindow(texts, beyond=True)  # past the window, a gap, or an overlap
        records = split_records(data)
        if len(records) != last_seq - first_seq + 1:
            return StagedWindow(texts, beyond=True)  # a chunk changed behind the kit's back
        texts += records[expected - first_seq : upto - first_seq + 1]
        if last_seq > upto:
            return StagedWindow(texts, beyond=True)
    return StagedWindow(texts, beyond=False)
