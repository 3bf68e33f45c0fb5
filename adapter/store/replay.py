"""The commit's replay read: the staged records of an import, a chunk at a time, as stored.

One prebuilt Core statement on a plain read connection (no ORM session, no unit of work): a keyset
chunk of ``(seq, data)`` rows, so memory stays bounded whatever the size of the import. The records
come back as the compact JSON texts the add path stored; nothing is decoded here.
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Connection, Table, bindparam, select

from adapter.store.tables import StagedRecordRow

__all__ = ["staged_chunk"]

_staged = cast(Table, StagedRecordRow.__table__)

_CHUNK = (
    select(_staged.c.seq, _staged.c.data)
    .where(_staged.c.import_id == bindparam("import_id"), _staged.c.seq > bindparam("after"))
    .order_by(_staged.c.seq)
    .limit(bindparam("size"))
)


def staged_chunk(connection: Connection, import_id: str, after_seq: int, size: int) -> tuple[int, list[str]]:
    """The next ``size`` staged records after ``after_seq`` in order: the last seq read (``after_seq``
    when none) and the records' JSON texts."""
    rows = connection.execute(_CHUNK, {"import_id": import_id, "after": after_seq, "size": size}).all()
    if not rows:
        return after_seq, []
    return rows[-1][0], [data for _, data in rows]
