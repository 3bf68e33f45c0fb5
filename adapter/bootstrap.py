"""The one place that wires concrete parts: store, legacy port and services.

Entry points call :func:`build` with settings; tests call it too, with the parts they want in place
of what the settings name (a store on a temporary database, a commit policy with fast retries), and
get the very same service layer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from adapter.config import ConfigError, Settings, ensure_secret_file
from adapter.domain.confirmation import ConfirmationRules
from adapter.domain.cursors import CursorCodec
from adapter.domain.identity import HandleCodec
from adapter.domain.records import Limits
from adapter.legacy.instrumented import InstrumentedPort
from adapter.ports.legacy import LegacyPort
from adapter.ports.targets import port_targets
from adapter.services import CommitPolicy, ImportService, ServiceContext
from adapter.services.admin import AdminService
from adapter.services.targets import TargetRules
from adapter.startup import create_owner_only
from adapter.store import Store

__all__ = ["Kit", "build", "build_legacy_port", "commit_policy_for", "engine_options"]


@dataclass(slots=True)
class Kit:
    """Everything a running process holds; ``close`` releases it."""

    settings: Settings
    store: Store
    legacy: LegacyPort
    service: ImportService
    admin: AdminService

    def close(self) -> None:
        self.store.dispose()
        close = getattr(self.legacy, "close", None)
        if callable(close):
            close()


def build_legacy_port(settings: Settings) -> LegacyPort:
    """The port ``ADAPTER_LEGACY_PORT`` names; unset, the simulator, in-process (``embedded``) or over TCP.

    Every entry point (serve, stdio, reconcile, ops, /readyz) builds its port here.
    """
    if settings.legacy_port:
        from adapter.legacy.loading import load_port

        return load_port(settings.legacy_port, settings)
    from adapter.legacy.simulator import SimulatorPort  # only the reference port knows the simulator

    return SimulatorPort.from_url(
        settings.legacy_url, embedded_db_path=settings.legacy_db, timeout=settings.legacy_timeout_seconds
    )


def engine_options(settings: Settings) -> dict[str, object]:
    """Pool size and wait from settings; SQLite keeps SQLAlchemy's own pool (one file, one writer)."""
    if settings.database_url.startswith("sqlite"):
        return {}
    return {
        "pool_size": settings.db_pool_size,
        "max_overflow": settings.db_max_overflow,
        "pool_timeout": settings.db_pool_timeout_seconds,
    }


def commit_policy_for(settings: Settings, base: CommitPolicy | None = None) -> CommitPolicy:
    """The commit flow's tuning as the settings give it, over ``base`` (which supplies what no
    setting names, the retry waits: tests pass millisecond ones)."""
    return dataclasses.replace(
        base or CommitPolicy(),
        chunk_size=settings.commit_chunk_size,
        max_attempts=settings.commit_max_attempts,
        lease_seconds=settings.lease_seconds,
        unknown_grace_seconds=settings.unknown_grace_seconds,
        wait_seconds=settings.commit_wait_seconds,
    )


def build(
    settings: Settings,
    *,
    legacy: LegacyPort | None = None,
    store: Store | None = None,
    commit_policy: CommitPolicy | None = None,
) -> Kit:
    """Wire a kit. ``legacy``, ``store`` and ``commit_policy`` replace what the settings would give
    (tests pass millisecond retry waits, which are no setting, so nothing reaches into the services)."""
    # Local mode: the database and the simulator's files are the owner's only (no simulator file
    # when the caller brings its own port).
    create_owner_only(settings, simulator=legacy is None)
    store = store or Store.from_url(settings.database_url, **engine_options(settings))
    # Every legacy call is timed; the HTTP app registers its metrics as an observer (see metrics.py).
    legacy = InstrumentedPort(legacy or build_legacy_port(settings))
    try:
        targets = TargetRules(port_targets(legacy.inner))
    except ValueError as exc:  # a bad declaration (or a schema that is not JSON Schema) stops start-up
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"the legacy port's targets are invalid: {first}") from None
    ensure_secret_file(settings)  # start-up creates the key file once; Settings only read it
    secret = settings.secret_bytes()
    # In local mode a handle is a bearer secret: it must not outlive local_ttl_seconds.
    max_ttl = settings.local_ttl_seconds if settings.local_mode else Limits().max_ttl_seconds
    default_ttl = min(settings.default_ttl_seconds, max_ttl)
    ctx = ServiceContext(
        store=store,
        legacy=legacy,
        codec=HandleCodec(secret),
        cursors=CursorCodec(secret),
        limits=Limits(
            max_records_per_call=settings.max_records_per_call,
            max_record_bytes=settings.max_record_bytes,
            max_ttl_seconds=max_ttl,
        ),
        commit_policy=commit_policy or commit_policy_for(settings),
        default_ttl_seconds=default_ttl,
        targets=targets,
        quotas=settings.quotas(),
        confirmation=ConfirmationRules(
            settings.confirm_commit, settings.confirm_max_rounds, settings.confirm_max_seconds
        ),
        task_ttl_seconds=settings.retention_days * 86_400.0,
    )
    service = ImportService(ctx)
    return Kit(
        settings=settings,
        store=store,
        legacy=legacy,
        service=service,
        admin=AdminService(
            ctx, resume=service.resumer(wait=False), min_free_disk_bytes=settings.min_free_disk_bytes
        ),
    )
