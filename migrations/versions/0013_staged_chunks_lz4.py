"""Staged chunks compressed with LZ4 on PostgreSQL, where the server has it.

Issue 25: a chunk holds the records of one add, and past about 2 KB PostgreSQL compresses it as it
writes the row (TOAST), by default with ``pglz``. Measured on this project's machine (PostgreSQL 15,
backend CPU per insert of a chunk of 100 records, 2,000 inserts): 0.075 ms with ``pglz`` against
0.030 ms with ``lz4`` for 5.8 KB chunks, and 0.34 ms against 0.055 ms for 36 KB chunks (records of
about 360 bytes), about as small on disk; reading them back at the commit costs the same or less.

Only values written from now on use it; chunks staged before keep ``pglz`` and read as before (each
value names its own method). PostgreSQL before 14, or a server built without LZ4, keeps ``pglz``:
the setting ``default_toast_compression`` then does not offer ``lz4``. SQLite stores text as it is:
nothing to do there.
"""

import sqlalchemy as sa
from alembic import op

revision: str = '0013'
down_revision: str | None = '0012'


def _lz4_available() -> bool:
    connection = op.get_bind()
    if connection.dialect.name != 'postgresql':
        return False
    offered = connection.execute(
        sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
    ).scalar()
    return offered is not None and 'lz4' in offered


def upgrade() -> None:
    if _lz4_available():
        op.execute('ALTER TABLE staged_chunks ALTER COLUMN data SET COMPRESSION lz4')


def downgrade() -> None:
    if _lz4_available():
        op.execute('ALTER TABLE staged_chunks ALTER COLUMN data SET COMPRESSION DEFAULT')
