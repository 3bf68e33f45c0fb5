"""staged_records keyed by (import_id, seq): no surrogate id, no foreign key.

Staging is the hot write path (issue 15). On PostgreSQL a COPY of 500 records paid, per row, a
sequence ``nextval`` for the surrogate id, a second index, and the foreign-key trigger's lookup of
the import: about half of the COPY's cost. The position is the natural key (it was already unique),
and the import row is locked while records are staged, so the foreign key only guarded against a
bug: every delete of an import deletes its staged records first (``RetentionRepository._delete``).
"""

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'


def upgrade() -> None:
    with op.batch_alter_table('staged_records', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('fk_staged_records_import_id_imports'), type_='foreignkey')
        batch_op.drop_constraint(op.f('uq_staged_records_import_id_seq'), type_='unique')
        batch_op.drop_constraint(op.f('pk_staged_records'), type_='primary')
        batch_op.drop_column('id')
        batch_op.create_primary_key(op.f('pk_staged_records'), ['import_id', 'seq'])


def downgrade() -> None:
    """Back to a surrogate id and the foreign key; staged records are kept in their order."""
    op.execute('CREATE TABLE staged_records_kept AS SELECT import_id, seq, data FROM staged_records')
    op.drop_table('staged_records')
    op.create_table('staged_records',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('import_id', sa.String(length=32), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('data', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(
        ['import_id'], ['imports.id'], name=op.f('fk_staged_records_import_id_imports'), ondelete='CASCADE'
    ),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_staged_records')),
    sa.UniqueConstraint('import_id', 'seq', name=op.f('uq_staged_records_import_id_seq'))
    )
    op.execute(
        'INSERT INTO staged_records (import_id, seq, data) '
        'SELECT import_id, seq, data FROM staged_records_kept ORDER BY import_id, seq'
    )
    op.drop_table('staged_records_kept')
