"""Confirmation rounds: each answered once, in every worker."""

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'


def _text(name: str, length: int, *, null: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.String(length=length), nullable=null)


def upgrade() -> None:
    op.create_table('confirmation_rounds',
    _text('round_id', 32), _text('principal', 200), _text('tenant', 200), _text('import_id', 32),
    _text('decision', 16),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('round_id', name=op.f('pk_confirmation_rounds'))
    )
    op.create_index(op.f('ix_confirmation_rounds_created_at'), 'confirmation_rounds', ['created_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_confirmation_rounds_created_at'), table_name='confirmation_rounds')
    op.drop_table('confirmation_rounds')
