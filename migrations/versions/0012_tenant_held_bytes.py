"""What each tenant holds against its staged-bytes quota, kept as a total instead of summed per add.

Issue 25: every ``add_records`` summed the staged bytes of its tenant's holding imports (open ones,
and committed ones until the purge drops their records, ``ADAPTER_RETENTION_DAYS`` later) along the
partial index ``ix_imports_holding``: a cost in proportion to what the tenant holds, 1.29 ms of
PostgreSQL CPU an add with 5,000 imports held, and a busy tenant holds hundreds of thousands.

* ``tenant_held_bytes``: one row per tenant, its total as of the last fold.
* ``held_bytes_changes``: what moved since, one row per tenant and database connection (PostgreSQL's
  backend pid; 0 on SQLite, which has one writer), moved by a trigger on ``imports`` whenever a
  row's share moves (its ``staged_bytes`` while it holds, else 0): an add, a replace, an abort or
  expiry (the share drops to 0), the purge (bytes zeroed, rows deleted). The trigger sees every
  writer, the kit's statements, its ORM and an operator's SQL alike. A connection only ever changes
  its own row, so a tenant's concurrent adds wait on no shared row (one counter row that every add
  updated would serialise them, and could deadlock against a pass that updates many imports).
  Maintenance folds the rows into the totals (``held_bytes.fold_held_bytes``), skipping any row a
  transaction in flight holds.
* An add reads its tenant's total plus its rows here: a primary-key lookup and one row per
  connection that changed it since the last fold, whatever the tenant holds. ``ix_imports_holding``
  has no reader left and is dropped; an add's update of ``staged_bytes`` then touches no index of
  ``imports``, so PostgreSQL can keep it on the row's page (a HOT update).
* ``held_bytes_changes`` is created with ``fillfactor = 10`` on PostgreSQL: its rows are few and
  updated by every add, and a tenth-full page spreads the connections' rows over several pages
  instead of one that every add locks in turn (the trigger's update took 0.027 ms instead of
  0.064 under ``bench/load.py``).

The totals are filled from the imports, with the triggers already in place, in the migration's
transaction (on PostgreSQL ``CREATE TRIGGER`` holds writes to ``imports`` until it commits), so no
change falls between. A later migration that rebuilds ``imports`` on SQLite (a batch operation
that copies the table) drops its triggers and must create them again;
``tests/store/test_held_bytes.py`` checks they are there at the head revision.
"""

import sqlalchemy as sa
from alembic import op

revision: str = '0012'
down_revision: str | None = '0011'

HOLDING = "staged_bytes > 0 AND state <> 'aborted' AND state <> 'expired'"  # tables.HOLDING, as of 0012

_POSTGRES_FUNCTION = """
CREATE FUNCTION held_bytes_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    held_before bigint := 0;
    held_after bigint := 0;
    tenant_before text;
    tenant_after text;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        tenant_before := OLD.tenant;
        IF OLD.staged_bytes > 0 AND OLD.state NOT IN ('aborted', 'expired') THEN
            held_before := OLD.staged_bytes;
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        tenant_after := NEW.tenant;
        IF NEW.staged_bytes > 0 AND NEW.state NOT IN ('aborted', 'expired') THEN
            held_after := NEW.staged_bytes;
        END IF;
    END IF;
    IF tenant_before = tenant_after THEN  -- an update within the tenant: one change, the difference
        held_after := held_after - held_before;
        held_before := 0;
    END IF;
    IF held_before <> 0 THEN
        INSERT INTO held_bytes_changes (tenant, backend, change)
        VALUES (tenant_before, pg_backend_pid(), -held_before)
        ON CONFLICT (tenant, backend) DO UPDATE SET change = held_bytes_changes.change + EXCLUDED.change;
    END IF;
    IF held_after <> 0 THEN
        INSERT INTO held_bytes_changes (tenant, backend, change)
        VALUES (tenant_after, pg_backend_pid(), held_after)
        ON CONFLICT (tenant, backend) DO UPDATE SET change = held_bytes_changes.change + EXCLUDED.change;
    END IF;
    RETURN NULL;
END
$$
"""
# Each trigger runs the function only where the row's share may have moved.
_POSTGRES_TRIGGERS = (
    "CREATE TRIGGER held_bytes_on_insert AFTER INSERT ON imports FOR EACH ROW "
    "WHEN (NEW.staged_bytes > 0) EXECUTE FUNCTION held_bytes_changed()",
    "CREATE TRIGGER held_bytes_on_update AFTER UPDATE OF tenant, state, staged_bytes ON imports "
    "FOR EACH ROW WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant OR OLD.state IS DISTINCT FROM NEW.state "
    "OR OLD.staged_bytes IS DISTINCT FROM NEW.staged_bytes) EXECUTE FUNCTION held_bytes_changed()",
    "CREATE TRIGGER held_bytes_on_delete AFTER DELETE ON imports FOR EACH ROW "
    "WHEN (OLD.staged_bytes > 0) EXECUTE FUNCTION held_bytes_changed()",
)

_NEW_SHARE = "CASE WHEN NEW.staged_bytes > 0 AND NEW.state NOT IN ('aborted', 'expired') THEN NEW.staged_bytes ELSE 0 END"
_OLD_SHARE = "CASE WHEN OLD.staged_bytes > 0 AND OLD.state NOT IN ('aborted', 'expired') THEN OLD.staged_bytes ELSE 0 END"


def _sqlite_change(tenant: str, change: str) -> str:
    return (
        f"INSERT INTO held_bytes_changes (tenant, backend, change) VALUES ({tenant}, 0, {change}) "
        "ON CONFLICT (tenant, backend) DO UPDATE SET change = change + excluded.change;"
    )


_SQLITE_TRIGGERS = (
    f"""CREATE TRIGGER held_bytes_on_insert AFTER INSERT ON imports WHEN ({_NEW_SHARE}) <> 0
    BEGIN {_sqlite_change('NEW.tenant', _NEW_SHARE)} END""",
    f"""CREATE TRIGGER held_bytes_on_update AFTER UPDATE OF tenant, state, staged_bytes ON imports
    WHEN OLD.tenant = NEW.tenant AND ({_NEW_SHARE}) <> ({_OLD_SHARE})
    BEGIN {_sqlite_change('NEW.tenant', f'({_NEW_SHARE}) - ({_OLD_SHARE})')} END""",
    f"""CREATE TRIGGER held_bytes_on_move AFTER UPDATE OF tenant ON imports WHEN OLD.tenant <> NEW.tenant
    BEGIN {_sqlite_change('OLD.tenant', f'-({_OLD_SHARE})')} {_sqlite_change('NEW.tenant', _NEW_SHARE)} END""",
    f"""CREATE TRIGGER held_bytes_on_delete AFTER DELETE ON imports WHEN ({_OLD_SHARE}) <> 0
    BEGIN {_sqlite_change('OLD.tenant', f'-({_OLD_SHARE})')} END""",
)
_SQLITE_TRIGGER_NAMES = ('held_bytes_on_insert', 'held_bytes_on_update', 'held_bytes_on_move', 'held_bytes_on_delete')
_POSTGRES_TRIGGER_NAMES = ('held_bytes_on_insert', 'held_bytes_on_update', 'held_bytes_on_delete')


def upgrade() -> None:
    with op.batch_alter_table('imports', schema=None) as batch_op:  # before the triggers (see above)
        batch_op.drop_index('ix_imports_holding')
    op.create_table('tenant_held_bytes',
    sa.Column('tenant', sa.String(length=200), nullable=False),
    sa.Column('bytes', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('tenant', name=op.f('pk_tenant_held_bytes'))
    )
    op.create_table('held_bytes_changes',
    sa.Column('tenant', sa.String(length=200), nullable=False),
    sa.Column('backend', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('change', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('tenant', 'backend', name=op.f('pk_held_bytes_changes')),
    postgresql_with={'fillfactor': 10},  # see HeldBytesChangeRow
    )
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(_POSTGRES_FUNCTION)
        for trigger in _POSTGRES_TRIGGERS:
            op.execute(trigger)
    else:
        for trigger in _SQLITE_TRIGGERS:
            op.execute(trigger)
    op.execute(
        'INSERT INTO tenant_held_bytes (tenant, bytes) '
        f'SELECT tenant, SUM(staged_bytes) FROM imports WHERE {HOLDING} GROUP BY tenant'
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        for name in _POSTGRES_TRIGGER_NAMES:
            op.execute(f'DROP TRIGGER {name} ON imports')
        op.execute('DROP FUNCTION held_bytes_changed()')
    else:
        for name in _SQLITE_TRIGGER_NAMES:
            op.execute(f'DROP TRIGGER {name}')
    op.drop_table('held_bytes_changes')
    op.drop_table('tenant_held_bytes')
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.create_index(
            'ix_imports_holding',
            ['tenant', 'staged_bytes'],
            unique=False,
            postgresql_where=sa.text(HOLDING),
            sqlite_where=sa.text(HOLDING),
        )
