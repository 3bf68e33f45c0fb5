"""``ADAPTER_SQL_*``: the SQL port's settings, in a module of their own so start-up can name the
variables no setting reads (``adapter/startup.py``) without loading the port and its driver."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["SqlPortSettings"]


class SqlPortSettings(BaseSettings):
    """``ADAPTER_SQL_*``: where the legacy database is and which tables are targets."""

    model_config = SettingsConfigDict(env_prefix="ADAPTER_SQL_", extra="ignore")

    url: str
    tables: str = ""  # comma-separated; empty: every table with a primary key
    schema_name: str | None = None
    ledger_table: str = "adapter_batch_ledger"
    descriptions: dict[str, str] = {}  # JSON: {"table": "what the model reads about it"}
