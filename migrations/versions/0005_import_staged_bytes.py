"""imports.staged_bytes: the per-import and per-tenant byte quotas."""

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'


def upgrade() -> None:
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.add_column(sa.Column('staged_bytes', sa.BigInteger(), server_default='0', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.drop_column('staged_bytes')
