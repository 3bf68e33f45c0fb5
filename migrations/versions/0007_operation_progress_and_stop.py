"""operations.records_sent and operations.stop_requested: commits that outlive their request.

A commit now runs as the server's work, past the request that confirmed it (issue 20). Another
worker answering ``get_operation_status`` or ``tasks/get`` reads its progress from the row
(``records_sent``, written with each lease renewal), and ``abort_import`` or ``tasks/cancel``
reach the worker that runs it through the row (``stop_requested``, read by the same renewal and
checked in the transaction that writes ``commit_sent``).
"""

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'


def upgrade() -> None:
    with op.batch_alter_table('operations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('records_sent', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('stop_requested', sa.String(length=16), nullable=True))
        batch_op.create_index(
            'ix_operations_stop_requested',
            ['stop_requested'],
            unique=False,
            postgresql_where=sa.text('stop_requested IS NOT NULL'),
            sqlite_where=sa.text('stop_requested IS NOT NULL'),
        )


def downgrade() -> None:
    with op.batch_alter_table('operations', schema=None) as batch_op:
        batch_op.drop_index('ix_operations_stop_requested')
        batch_op.drop_column('stop_requested')
        batch_op.drop_column('records_sent')
