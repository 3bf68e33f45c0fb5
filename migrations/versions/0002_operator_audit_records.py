"""Operator audit records, and the indexes that page the admin lists newest first."""

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'


def upgrade() -> None:
    op.create_table('audit_records',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('operation_id', sa.String(length=32), nullable=False),
    sa.Column('actor', sa.String(length=200), nullable=False),
    sa.Column('action', sa.String(length=32), nullable=False),
    sa.Column('reason', sa.String(length=1000), nullable=True),
    sa.Column('outcome', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_records'))
    )
    with op.batch_alter_table('audit_records', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_records_operation_id'), ['operation_id'], unique=False)
    # Keyset pagination of the admin lists (newest first).
    with op.batch_alter_table('operations', schema=None) as batch_op:
        batch_op.create_index('ix_operations_created', ['created_at', 'id'], unique=False)
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.create_index('ix_imports_created', ['created_at', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.drop_index('ix_imports_created')
    with op.batch_alter_table('operations', schema=None) as batch_op:
        batch_op.drop_index('ix_operations_created')
    with op.batch_alter_table('audit_records', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_records_operation_id'))
    op.drop_table('audit_records')
