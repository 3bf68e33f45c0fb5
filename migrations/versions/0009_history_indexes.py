"""Indexes for a kit that keeps a year of history: what changed lately, and what a tenant holds.

Issue 25: finished imports, operations and events stay until retention purges them, so a query
that reads all of them costs in proportion to the history (``bench/history.py`` measures it).

* ``ix_operations_updated``: the late-commit watch (every maintenance pass: commits settled in the
  last minutes) and the purge (finished operations last updated before the cut-off) select by
  ``updated_at``; without it each read every operation kept.
* ``ix_imports_holding``: every ``add_records`` sums the bytes its tenant's imports hold (the
  staged-bytes quota). The partial index holds only imports that hold bytes (open ones, committed
  ones until the purge drops their records), so the sum no longer reads every import the tenant
  ever made.
"""

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'

HOLDING = "staged_bytes > 0 AND state <> 'aborted' AND state <> 'expired'"  # tables.HOLDING, as of 0009


def upgrade() -> None:
    with op.batch_alter_table('operations', schema=None) as batch_op:
        batch_op.create_index('ix_operations_updated', ['updated_at'], unique=False)
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.create_index(
            'ix_imports_holding',
            ['tenant', 'staged_bytes'],
            unique=False,
            postgresql_where=sa.text(HOLDING),
            sqlite_where=sa.text(HOLDING),
        )


def downgrade() -> None:
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.drop_index('ix_imports_holding')
    with op.batch_alter_table('operations', schema=None) as batch_op:
        batch_op.drop_index('ix_operations_updated')
