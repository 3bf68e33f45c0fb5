"""confirmation rounds: each answered once, in every worker

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('confirmation_rounds',
    sa.Column('round_id', sa.String(length=32), nullable=False),
    sa.Column('principal', sa.String(length=200), nullable=False),
    sa.Column('tenant', sa.String(length=200), nullable=False),
    sa.Column('import_id', sa.String(length=32), nullable=False),
    sa.Column('decision', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('round_id', name=op.f('pk_confirmation_rounds'))
    )
    with op.batch_alter_table('confirmation_rounds', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_confirmation_rounds_created_at'), ['created_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('confirmation_rounds', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_confirmation_rounds_created_at'))
    op.drop_table('confirmation_rounds')
