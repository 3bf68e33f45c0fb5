"""Operator sessions: the dashboard's server-side login sessions."""

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'


def upgrade() -> None:
    op.create_table('operator_sessions',
    sa.Column('id_hash', sa.String(length=64), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('expires_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id_hash', name=op.f('pk_operator_sessions'))
    )
    with op.batch_alter_table('operator_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_operator_sessions_expires_at'), ['expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('operator_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_operator_sessions_expires_at'))
    op.drop_table('operator_sessions')
