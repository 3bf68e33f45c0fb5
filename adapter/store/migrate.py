"""Run the Alembic migrations programmatically (``python -m adapter migrate``).

The migrations live in the project's top-level ``migrations/`` folder; the wheel ships that folder as
``adapter/store/migrations/`` (a package-dir mapping in ``setup.py``), so an installed kit migrates its
database from any working directory, without the source tree or an ``alembic.ini``. From a source tree
(an editable install, a checkout on ``PYTHONPATH``) the top-level folder is used.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

__all__ = ["alembic_config", "downgrade", "upgrade"]

_HERE = Path(__file__).resolve().parent
_INSTALLED = _HERE / "migrations"  # where the wheel puts them
_SOURCE = _HERE.parents[1] / "migrations"  # the project's top-level folder
MIGRATIONS = _INSTALLED if (_INSTALLED / "env.py").is_file() else _SOURCE


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.set_main_option("file_template", "%%(rev)s_%%(slug)s")
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)
