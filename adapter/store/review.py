"""The reads behind an import's review (``services/review.py``): a page of its staged records, how many
of them lack each field, and the fingerprints of the adds that staged them.

All three run on one plain read connection (``Store.review_reads()``: no ORM session, no unit of
work, so on SQLite no write lock is taken), each bounded by ``upto``, the record count the review
describes. Staged records are append-only, so the records at ``seq <= upto`` are the same whichever
moment each statement sees: the three answers describe the same records although they are three
statements.

The field counts run in the database: no record leaves it, only one number per field. Each chunk
of records (``staged.py``) is read as a JSON array and walked element by element
(``json_array_elements`` on PostgreSQL, ``json_each`` on SQLite). On SQLite
``json_type(value, '$."field"')`` is NULL for an absent field and ``'null'`` for a JSON null; on
PostgreSQL ``json_typeof(value -> field)`` says the same (``json``, not ``jsonb``: parsing is all it
needs, and it costs a quarter less). Both count as missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, case, func, literal, select, true
from sqlalchemy.dialects.postgresql import JSON

from adapter.store.staged import records_array, staged_window
from adapter.store.tables import OperationRow, StagedChunkRow

__all__ = ["ReviewReads", "countable_field"]

_chunks = cast(Table, StagedChunkRow.__table__)
_operations = cast(Table, OperationRow.__table__)

_ADDS = (
    select(_operations.c.request_fingerprint, _operations.c.result)
    .where(
        _operations.c.import_id == bindparam("import_id"),
        _operations.c.kind == bindparam("kind"),
        _operations.c.status == bindparam("status"),
    )
    .order_by(_operations.c.created_at, _operations.c.id)
)


def countable_field(name: str) -> bool:
    """Whether a field's missing values can be counted: a name SQLite's JSON path can quote (no
    double quote, no backslash, no control character), non-empty."""
    return bool(name) and not any(ch in '"\\' or ord(ch) < 0x20 for ch in name)


class ReviewReads:
    """The review's statements on one read connection."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def page(self, import_id: str, *, after: int, upto: int, size: int) -> list[tuple[int, str]]:
        """Up to ``size`` staged records after ``after`` and at most ``upto``, in order, as stored."""
        window = staged_window(self._connection, import_id, after, min(after + size, upto))
        return [(after + offset, text) for offset, text in enumerate(window.texts, start=1)]

    def missing(self, import_id: str, fields: Sequence[str], *, upto: int) -> dict[str, int]:
        """For each field (see :func:`countable_field`), how many of the records at ``seq <= upto``
        have it absent or null."""
        if not fields:
            return {}
        if any(not countable_field(name) for name in fields):
            raise ValueError("a field name the store cannot count")
        array = records_array(_chunks.c.data)
        if self._connection.dialect.name == "postgresql":
            elements = func.json_array_elements(array.cast(JSON))
            element = elements.table_valued("value", with_ordinality="ord").render_derived()
            position = _chunks.c.first_seq - 1 + element.c.ord
            kinds = [func.json_typeof(element.c.value.op("->")(literal(name))) for name in fields]
        else:
            element = func.json_each(array).table_valued("value", "key")
            position = _chunks.c.first_seq + element.c.key
            kinds = [func.json_type(element.c.value, literal(f'$."{name}"')) for name in fields]
        # absent (NULL) and null ('null') alike, the type asked once per field and record
        sums = [
            func.coalesce(func.sum(case((func.coalesce(kind, "null") == "null", 1), else_=0)), 0)
            for kind in kinds
        ]
        statement = (
            select(*sums)
            .select_from(_chunks)
            .join(element, true())
            .where(_chunks.c.import_id == import_id, _chunks.c.first_seq <= upto, position <= upto)
        )
        counts = self._connection.execute(statement).one()
        return {name: int(count) for name, count in zip(fields, counts, strict=True)}

    def finished(self, import_id: str, *, kind: str, status: str) -> list[tuple[str, dict[str, Any] | None]]:
        """The request fingerprint and result of each of the import's operations of ``kind`` in
        ``status`` (its adds, its replacements), oldest first."""
        rows = self._connection.execute(_ADDS, {"import_id": import_id, "kind": kind, "status": status}).all()
        return [(fingerprint, result) for fingerprint, result in rows]
