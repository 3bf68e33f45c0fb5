"""imports.revision: staged records that can be replaced, and a confirmation that names which.

Issue 22: a record the legacy system refuses can be replaced by position (``replace_records``).
Until then staged records were append-only, so the import id and its record count named exactly
what a person confirmed; a replacement keeps the count, so each one moves ``revision`` and the
confirmation names it too.
"""

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'


def upgrade() -> None:
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.add_column(sa.Column('revision', sa.Integer(), server_default='0', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.drop_column('revision')
