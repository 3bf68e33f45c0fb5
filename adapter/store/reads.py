"""Hot read paths, written with prebuilt Core statements on a plain connection.

``get_import_status`` is the most frequent call a host makes (it polls it). Going through the ORM
session costs several times more CPU than the SQL itself, so this path skips the session: the
statements are built once at import, and the connection runs a deferred (read-only) transaction.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select

from adapter.store.tables import ImportRow, OperationRow

__all__ = ["IMPORT_BY_DIGEST", "OPERATIONS_OF_IMPORT"]

_imports = ImportRow.__table__
_operations = OperationRow.__table__

IMPORT_BY_DIGEST = select(_imports).where(_imports.c.handle_digest == bindparam("digest"))
OPERATIONS_OF_IMPORT = (
    select(_operations.c.id, _operations.c.kind, _operations.c.status, _operations.c.created_at)
    .where(_operations.c.import_id == bindparam("import_id"))
    .order_by(_operations.c.created_at, _operations.c.id)
)
