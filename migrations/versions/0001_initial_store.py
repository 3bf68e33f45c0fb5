"""Initial store: imports, their staged records, operations, compensations and events."""

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | None = None

_SERIAL = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def _text(name: str, length: int, *, null: bool = False) -> sa.Column[str]:
    """A String column: most of this schema is ids, names and states of a fixed length."""
    return sa.Column(name, sa.String(length=length), nullable=null)


def _when(name: str, *, null: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(), nullable=null)


def _count(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.Integer(), nullable=False)


def _owned_by_import(table: str, ondelete: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ['import_id'], ['imports.id'], name=op.f(f'fk_{table}_import_id_imports'), ondelete=ondelete
    )


def upgrade() -> None:
    op.create_table('events',
    sa.Column('id', _SERIAL, autoincrement=True, nullable=False),
    _text('import_id', 32, null=True), _text('operation_id', 32, null=True), _text('kind', 64),
    _text('state', 32, null=True), sa.Column('detail', sa.JSON(), nullable=True), _when('created_at'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events'))
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_events_import_id'), ['import_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_events_operation_id'), ['operation_id'], unique=False)

    op.create_table('imports',
    _text('id', 32), _text('handle_digest', 64), _text('principal', 200), _text('tenant', 200),
    _text('target', 200), _text('state', 32), _count('record_count'), _text('legacy_batch_id', 100, null=True),
    _when('expires_at'), _when('created_at'), _when('updated_at'), _count('version'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_imports')),
    sa.UniqueConstraint('handle_digest', name=op.f('uq_imports_handle_digest'))
    )
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.create_index('ix_imports_owner_created', ['tenant', 'principal', 'created_at', 'id'], unique=False)
        batch_op.create_index('ix_imports_state_expires', ['state', 'expires_at'], unique=False)

    op.create_table('operations',
    _text('id', 32), _text('kind', 32), _text('principal', 200), _text('tenant', 200),
    _text('import_id', 32, null=True), _text('idempotency_key', 200, null=True),
    _text('request_fingerprint', 64), _text('status', 32), _text('batch_ref', 128, null=True),
    _text('recovery_point', 64, null=True),
    sa.Column('result', sa.JSON(), nullable=True), sa.Column('error', sa.JSON(), nullable=True),
    _count('attempts'), _text('lease_owner', 100, null=True), _when('lease_expires_at', null=True),
    _when('created_at'), _when('updated_at'), _count('version'),
    _owned_by_import('operations', 'SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_operations')),
    sa.UniqueConstraint('batch_ref', name=op.f('uq_operations_batch_ref')),
    sa.UniqueConstraint('tenant', 'principal', 'kind', 'idempotency_key', name=op.f('uq_operations_tenant_principal_kind_idempotency_key'))
    )
    with op.batch_alter_table('operations', schema=None) as batch_op:
        batch_op.create_index('ix_operations_import', ['import_id', 'created_at'], unique=False)
        batch_op.create_index('ix_operations_status_lease', ['status', 'lease_expires_at'], unique=False)

    op.create_table('staged_records',
    sa.Column('id', _SERIAL, autoincrement=True, nullable=False),
    _text('import_id', 32), _count('seq'), sa.Column('data', sa.Text(), nullable=False),
    _owned_by_import('staged_records', 'CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_staged_records')),
    sa.UniqueConstraint('import_id', 'seq', name=op.f('uq_staged_records_import_id_seq'))
    )
    op.create_table('compensations',
    _text('id', 32), _text('import_id', 32), _text('operation_id', 32), _text('legacy_batch_id', 100),
    _text('status', 32), _text('reason', 500), _count('attempts'), _text('last_error', 500, null=True),
    _when('created_at'), _when('updated_at'),
    _owned_by_import('compensations', 'CASCADE'),
    sa.ForeignKeyConstraint(['operation_id'], ['operations.id'], name=op.f('fk_compensations_operation_id_operations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_compensations')),
    sa.UniqueConstraint('legacy_batch_id', name=op.f('uq_compensations_legacy_batch_id'))
    )


def downgrade() -> None:
    op.drop_table('compensations')
    op.drop_table('staged_records')
    with op.batch_alter_table('operations', schema=None) as batch_op:
        batch_op.drop_index('ix_operations_status_lease')
        batch_op.drop_index('ix_operations_import')

    op.drop_table('operations')
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.drop_index('ix_imports_state_expires')
        batch_op.drop_index('ix_imports_owner_created')

    op.drop_table('imports')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_events_operation_id'))
        batch_op.drop_index(batch_op.f('ix_events_import_id'))

    op.drop_table('events')
