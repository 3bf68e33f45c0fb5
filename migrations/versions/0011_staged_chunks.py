"""Staged records as one row per add (``staged_chunks``), not one row per record.

Issue 25: an add of 100 records wrote 100 rows of ``staged_records``, and PostgreSQL pays each row
a heap tuple, a primary-key entry and a WAL record: about 1 ms of its CPU per add, most of what an
import cost it. A chunk holds the records of one add as their compact JSON texts joined by newlines
(``adapter/store/staged.py``), at positions ``first_seq .. last_seq``, keyed by ``last_seq``.

Records staged before the upgrade become one chunk each (``first_seq = last_seq = seq``): same
positions, same texts, nothing lost. The downgrade splits every chunk back into its records.
"""

import sqlalchemy as sa
from alembic import op

revision: str = '0011'
down_revision: str | None = '0010'

_BATCH = 1000


def upgrade() -> None:
    op.create_table('staged_chunks',
    sa.Column('import_id', sa.String(length=32), nullable=False),
    sa.Column('last_seq', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('first_seq', sa.Integer(), nullable=False),
    sa.Column('data', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('import_id', 'last_seq', name=op.f('pk_staged_chunks'))
    )
    op.execute(
        'INSERT INTO staged_chunks (import_id, last_seq, first_seq, data) '
        'SELECT import_id, seq, seq, data FROM staged_records'
    )
    op.drop_table('staged_records')


def downgrade() -> None:
    """Back to a row per record, each chunk split at its newlines, in bounded batches."""
    op.create_table('staged_records',
    sa.Column('import_id', sa.String(length=32), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('data', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('import_id', 'seq', name=op.f('pk_staged_records'))
    )
    connection = op.get_bind()
    chunks = sa.table(
        'staged_chunks', sa.column('import_id'), sa.column('last_seq'), sa.column('first_seq'), sa.column('data')
    )
    records = sa.table('staged_records', sa.column('import_id'), sa.column('seq'), sa.column('data'))
    after = ('', 0)
    while True:
        rows = connection.execute(
            sa.select(chunks.c.import_id, chunks.c.last_seq, chunks.c.first_seq, chunks.c.data)
            .where(sa.tuple_(chunks.c.import_id, chunks.c.last_seq) > sa.tuple_(*after))
            .order_by(chunks.c.import_id, chunks.c.last_seq)
            .limit(_BATCH)
        ).all()
        if not rows:
            break
        split = [
            {'import_id': import_id, 'seq': first_seq + offset, 'data': text}
            for import_id, _, first_seq, data in rows
            for offset, text in enumerate(data.split('\n'))
        ]
        connection.execute(records.insert(), split)
        after = (rows[-1][0], rows[-1][1])
    op.drop_table('staged_chunks')
