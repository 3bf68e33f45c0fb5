"""Packaging beyond what pyproject.toml can say: the top-level ``migrations/`` folder ships in the wheel.

The Alembic migrations live in ``migrations/`` at the top of the project (beside ``adapter/``), and an
installed kit must still migrate its database (``python -m adapter migrate``) without the source tree.
So the folder is mapped into the wheel as ``adapter/store/migrations`` (a ``package_dir`` mapping),
where ``adapter/store/migrate.py`` finds it. ``pyproject.toml``'s ``packages.find`` cannot be combined
with a mapped package, so the package list is made here: every ``adapter*`` and ``legacy_sim*``
package, plus the mapping. Everything else (metadata, dependencies, scripts) is in pyproject.toml.
"""

from setuptools import find_packages, setup

MIGRATIONS = "adapter.store.migrations"

setup(
    packages=[*find_packages(include=["adapter*", "legacy_sim*"]), MIGRATIONS],
    package_dir={MIGRATIONS: "migrations"},  # its files are package data, listed in pyproject.toml
)
