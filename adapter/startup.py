"""Checks made once when a process starts: settings that only make sense together, and files.

* :func:`check_serving` refuses to serve when ``ADAPTER_UNKNOWN_GRACE_SECONDS`` is not above
  ``ADAPTER_LEGACY_TIMEOUT_SECONDS``: a COMMIT may still land up to the legacy timeout after it was
  sent, so a shorter grace period would believe "not committed" of a batch that is about to appear.
* :func:`warn_about_token_file` warns when the bearer token file can be read by other users.
* :func:`create_owner_only` creates the SQLite database and the embedded simulator's file readable
  by their owner only, in either mode: they hold every tenant's records (and in local mode, where a
  handle is a bearer secret, all of those too); the simulator's file only when the simulator is the
  port.
* :func:`warn_about_unknown_settings` names every ``ADAPTER_*`` variable that no setting reads (a
  misspelt name was ignored silently).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.engine import make_url

from adapter.config import ConfigError, Settings

__all__ = [
    "check_schema_current",
    "check_serving",
    "create_owner_only",
    "sqlite_path",
    "warn_about_token_file",
    "warn_about_unknown_settings",
]

# ADAPTER_* names read outside Settings: the SQL port's own settings are checked by their model.
_OTHER_NAMES = frozenset({"ADAPTER_WORKER_PUBLIC_URL", "ADAPTER_TEST_POSTGRES_URL"})

log = logging.getLogger("adapter.startup")


def check_serving(settings: Settings) -> None:
    if settings.unknown_grace_seconds <= settings.legacy_timeout_seconds:
        raise ConfigError(
            "invalid setting ADAPTER_UNKNOWN_GRACE_SECONDS: must be above ADAPTER_LEGACY_TIMEOUT_SECONDS "
            f"({settings.unknown_grace_seconds:g} <= {settings.legacy_timeout_seconds:g}); a COMMIT can "
            "still land until the legacy timeout"
        )


def check_schema_current(database_url: str, *, before: str = "serving") -> None:
    """Serve only a database migrated to head: else one line that says to migrate, and exit 2.

    A server on an unmigrated database would answer every request with an error and log a
    traceback on every maintenance pass. A SQLite file that does not exist yet is not created here
    (``migrate`` creates it, owner-only in local mode)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from adapter.store.engine import make_engine
    from adapter.store.migrate import alembic_config

    head = ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()
    current: str | None = None
    path = sqlite_path(database_url)
    if path is None or path.exists():
        engine = make_engine(database_url)
        try:
            with engine.connect() as conn:
                current = MigrationContext.configure(conn).get_current_revision()
        except Exception as exc:  # the database cannot be reached: one line too
            raise ConfigError(f"cannot read the database's schema revision: {type(exc).__name__}") from None
        finally:
            engine.dispose()
    if current != head:
        raise ConfigError(
            f"the database is at revision {current or 'none'}, not {head}: run `python -m adapter migrate` "
            f"once before {before}"
        )


def warn_about_token_file(settings: Settings) -> bool:
    """Log a warning (and return True) when ADAPTER_TOKENS names a file others may read."""
    if settings.tokens is None:
        return False
    try:
        mode = os.stat(settings.tokens).st_mode
    except OSError:
        return False  # loading it reports the problem
    if mode & (stat.S_IROTH | stat.S_IWOTH):
        log.warning(
            "ADAPTER_TOKENS file %s is readable by other users (mode %o); chmod 600 it",
            settings.tokens,
            stat.S_IMODE(mode),
        )
        return True
    return False


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL, or None (another database, or in memory)."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    if parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


def create_owner_only(settings: Settings, *, simulator: bool = True) -> None:
    """Create the database and legacy files as 0600 before SQLite creates them.

    SQLite gives its ``-wal`` and ``-shm`` files the mode of the database file. Files that already
    exist are left as they are. The embedded simulator's file only when the simulator is the port:
    not with ``ADAPTER_LEGACY_PORT``, nor when the caller passes a port (``simulator=False``).
    """
    paths = [sqlite_path(settings.database_url)]
    if simulator and settings.legacy_url == "embedded" and not settings.legacy_port:
        paths.append(Path(settings.legacy_db))
    for path in paths:
        if path is None or path.exists():
            continue
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:  # a missing directory: SQLite reports it better
            log.debug("could not pre-create %s: %s", path, exc)


def warn_about_unknown_settings(environ: Mapping[str, str]) -> list[str]:
    """Log one warning naming the ``ADAPTER_*`` variables no setting reads; returns them, sorted.

    Known: every field of :class:`Settings`, of the SQL port's ``ADAPTER_SQL_*`` settings, and the
    few names the kit passes itself. A port of your own reads its settings under a prefix of its own.
    """
    from adapter.legacy.sql_settings import SqlPortSettings

    known = {"ADAPTER_" + name.upper() for name in Settings.model_fields}
    known |= {"ADAPTER_SQL_" + name.upper() for name in SqlPortSettings.model_fields}
    unknown = sorted(
        name for name in environ if name.startswith("ADAPTER_") and name not in known | _OTHER_NAMES
    )
    if unknown:
        log.warning("unknown settings ignored: %s (see docs/operations.md, Settings)", ", ".join(unknown))
    return unknown
