"""Hot read paths, written with prebuilt Core statements on a plain, autocommit connection.

``get_import_status`` is the most frequent call a host makes (it polls it). Going through the ORM
session costs several times more CPU than the SQL itself, and a transaction costs two more round
trips on a networked database. So this path is one prebuilt statement (the import joined with its
operations), run outside any transaction: a single statement sees one consistent snapshot anyway.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select

from adapter.store.tables import ImportRow, OperationRow

__all__ = ["IMPORT_WITH_OPERATIONS"]

_imports = ImportRow.__table__
_operations = OperationRow.__table__

IMPORT_WITH_OPERATIONS = (
    select(
        _imports,
        _operations.c.id.label("op_id"),
        _operations.c.kind.label("op_kind"),
        _operations.c.status.label("op_status"),
        _operations.c.created_at.label("op_created_at"),
    )
    .select_from(_imports.outerjoin(_operations, _operations.c.import_id == _imports.c.id))
    .where(_imports.c.handle_digest == bindparam("digest"))
    .order_by(_operations.c.created_at, _operations.c.id)
)
"""One row per operation of the import (one row with NULL ``op_*`` when it has none)."""
