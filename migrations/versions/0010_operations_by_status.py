"""The admin operations list filtered by status, newest first, read in index order.

Issue 25: SQLite plans without statistics, so for ``status = ? ORDER BY created_at DESC, id DESC``
it read every operation of that status through ``ix_operations_status_lease`` and sorted them: 86x
an empty database's time at 200,000 imports of history (``bench/history.py``). With the status
first and the list's order after it, a page is the index's first rows, on either database, whether
the status is common (``succeeded``) or rare (``needs_operator``).
"""

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"


def upgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.create_index("ix_operations_status_created", ["status", "created_at", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.drop_index("ix_operations_status_created")
