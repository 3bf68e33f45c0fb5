"""Configuration, read once at the edge from ``ADAPTER_*`` environment variables.

A bad setting stops start-up with one clear line (``python -m adapter`` prints it and exits 2).
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, PositiveFloat, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from adapter.domain.quotas import Quotas

__all__ = ["ConfigError", "Settings", "ensure_secret_file", "load_settings"]


MIB = 1024 * 1024


class ConfigError(Exception):
    """A setting is missing or wrong; the message is one line meant for the operator."""


Era = Literal["modern", "legacy"]
# RFC 6749 scope-token: printable ASCII without space, quote or backslash (it goes into WWW-Authenticate).
_SCOPE_TOKEN = r"^[!#-\[\]-~]{1,100}$"


def _both_eras() -> list[Era]:
    return ["modern", "legacy"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ADAPTER_", extra="ignore")

    @property
    def local_mode(self) -> bool:
        """No token file and no identity provider: loopback only, one principal, short-lived handles."""
        return self.tokens is None and self.oauth_issuer is None

    @property
    def resource_server(self) -> bool:
        """OAuth 2.1 resource-server mode: callers are who the identity provider's tokens say."""
        return self.oauth_issuer is not None

    database_url: str = "sqlite:///./adapter.db"
    legacy_url: str = "embedded"
    legacy_db: str = "./legacy_sim.db"
    legacy_timeout_seconds: PositiveFloat = 10.0
    # Your own system: "package.module:factory", factory(settings) -> LegacyPort. Unset: the simulator.
    legacy_port: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    secret: str | None = None
    secret_file: str = "./adapter.secret"
    default_ttl_seconds: int = Field(default=3600, ge=10, le=7 * 24 * 3600)
    max_records_per_call: int = Field(default=1000, ge=1, le=1000)
    max_record_bytes: int = Field(default=64 * 1024, ge=64)
    commit_chunk_size: int = Field(default=500, ge=1, le=10_000)
    commit_max_attempts: int = Field(default=4, ge=1, le=20)
    lease_seconds: float = Field(default=30.0, ge=1)
    # How long a request waits for a commit (or a status change) before it answers in_progress; the
    # commit goes on in the background. Below the shortest common client timeout (openai-agents: 5 s).
    commit_wait_seconds: float = Field(default=4.0, ge=0, le=60)
    # --- the database connections (per worker; see docs/deployment.md for sizing) ---
    db_pool_size: int = Field(default=10, ge=1, le=1000)
    db_max_overflow: int = Field(default=10, ge=0, le=1000)
    db_pool_timeout_seconds: PositiveFloat = 10.0
    event_catch_up_seconds: PositiveFloat = 1.0
    # --- operations (admin API, dashboard) ---
    admin_token: str | None = None
    admin_readonly_token: str | None = None
    # --- limits before authentication, operator sessions (docs/operations.md, "Limits") ---
    # One body limit for the kit and the SDK (which refuses above its own, 4 MiB by default).
    max_body_bytes: int = Field(default=4 * MIB, ge=1024, le=256 * MIB)
    admin_max_body_bytes: int = Field(default=16 * 1024, ge=1024, le=1024 * 1024)
    api_docs: bool = False
    dashboard_allowed_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    operator_session_seconds: int = Field(default=8 * 3600, ge=60, le=7 * 24 * 3600)
    login_max_failures: int = Field(default=5, ge=1, le=1000)
    login_failure_window_seconds: PositiveFloat = 60.0
    # --- what one HTTP request may cost, and the connections (docs/operations.md, "Limits") ---
    max_json_depth: int = Field(default=64, ge=8, le=1000)
    max_json_elements: int = Field(default=100_000, ge=1000)
    max_request_bytes_per_second_per_principal: int = Field(default=16 * MIB, ge=1024)
    max_json_elements_per_second_per_principal: int = Field(default=200_000, ge=1000)
    max_requests_per_second_per_principal: int = Field(default=200, ge=1)
    http_header_timeout_seconds: PositiveFloat = 10.0
    http_body_timeout_seconds: PositiveFloat = 30.0
    http_keep_alive_seconds: int = Field(default=5, ge=1, le=3600)
    http_max_connections: int = Field(default=1000, ge=1)
    # Addresses whose X-Forwarded-For / X-Forwarded-Proto are believed (a reverse proxy); empty: none.
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    min_free_disk_bytes: int = Field(default=64 * MIB, ge=0)
    # --- quotas and fairness (adapter/domain/quotas.py; docs/operations.md, "Quotas") ---
    max_records_per_import: int = Field(default=100_000, ge=1, le=100_000_000)
    max_import_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    max_open_imports_per_principal: int = Field(default=100, ge=1)
    max_staged_bytes_per_tenant: int = Field(default=2048 * 1024 * 1024, ge=1024)
    max_commits_per_tenant: int = Field(default=4, ge=1)
    legacy_sessions: int = Field(default=16, ge=1, le=1000)
    max_listens_per_principal: int = Field(default=8, ge=1)
    max_legacy_sessions_per_principal: int = Field(default=32, ge=1)
    max_stage_bytes_per_second_per_principal: int = Field(default=8 * MIB, ge=1024)
    max_stage_records_per_second_per_principal: int = Field(default=20_000, ge=1)
    max_stage_bytes_per_second_per_tenant: int = Field(default=16 * MIB, ge=1024)
    max_stage_records_per_second_per_tenant: int = Field(default=40_000, ge=1)
    max_uris_per_listen: int = Field(default=100, ge=1, le=10_000)
    delete_batch_size: int = Field(default=2000, ge=1, le=100_000)
    # --- reconciliation and retention ---
    reconcile_interval_seconds: PositiveFloat = 5.0
    unknown_grace_seconds: float = Field(default=30.0, ge=0)
    retention_days: PositiveFloat = 7.0
    purge_batch_size: int | None = Field(default=None, ge=1, le=100_000)  # None: retention.PURGE_BATCH
    # --- the MCP server ---
    tokens: str | None = None
    page_size: int = Field(default=50, ge=1, le=1000)
    confirm_commit: Literal["when-supported", "always", "never"] = "when-supported"
    allowed_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    local_ttl_seconds: int = Field(default=900, ge=10)
    confirm_max_rounds: int = Field(default=3, ge=1, le=10)
    confirm_max_seconds: int = Field(default=600, ge=10, le=3600)
    # MCP Apps (io.modelcontextprotocol/ui): the review view of an import for hosts that declare the
    # extension (adapter/entrypoints/mcp/apps.py). Off: not advertised, no tool names a view.
    apps_view: bool = True
    # --- how the server presents itself (two wrapped systems side by side stay distinguishable) ---
    server_name: str = Field(default="legacy-import-adapter", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    server_title: str = Field(default="Legacy import adapter", min_length=1, max_length=200)
    server_instructions: str | None = Field(default=None, min_length=1, max_length=8000)
    tool_prefix: str = Field(default="", pattern=r"^([a-z][a-z0-9]{0,15}_)?$")
    # Which MCP protocol eras are served: "modern" (2026-07-28, per-request envelope) and "legacy"
    # (the 2024-11-05 .. 2025-11-25 initialize handshake). Default both; "modern" for modern-only.
    protocol_eras: Annotated[list[Era], NoDecode] = Field(default_factory=_both_eras, min_length=1)
    legacy_session_idle_seconds: PositiveFloat = 300.0
    # The SDK's max_sessions for this process: above what one principal may hold (checked below).
    legacy_max_sessions: int = Field(default=10_000, ge=2)
    # --- OAuth 2.1 resource server (docs/operations.md, "Signing in through an identity provider") ---
    # Set: tokens come from this authorization server (JWTs checked against its keys, or RFC 7662
    # introspection); excludes ADAPTER_TOKENS. See adapter/entrypoints/oauth/.
    oauth_issuer: str | None = None
    # This server's canonical resource URL (the tokens' `aud`); unset: the public URL + /mcp.
    oauth_audience: str | None = None
    oauth_principal_claim: str = Field(default="sub", min_length=1, max_length=200)
    oauth_tenant_claim: str = Field(default="tenant", min_length=1, max_length=200)
    oauth_algorithms: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["RS256", "PS256", "ES256", "EdDSA"], min_length=1
    )
    oauth_leeway_seconds: int = Field(default=30, ge=0, le=300)
    # An unknown `kid` refetches the issuer's key set at most this often (key rotation, no restart).
    oauth_jwks_refetch_seconds: float = Field(default=30.0, ge=0, le=3600)
    # The key set is fetched again after this long even when no unknown key was seen (revoked keys).
    oauth_jwks_max_age_seconds: float = Field(default=3600.0, ge=10, le=7 * 24 * 3600)
    oauth_introspection_url: str | None = None
    oauth_client_id: str | None = None
    oauth_client_secret: str | None = None
    oauth_scope_read: str = Field(default="imports:read", pattern=_SCOPE_TOKEN)
    oauth_scope_write: str = Field(default="imports:write", pattern=_SCOPE_TOKEN)
    oauth_scope_commit: str = Field(default="imports:commit", pattern=_SCOPE_TOKEN)
    oauth_scope_abort: str = Field(default="imports:abort", pattern=_SCOPE_TOKEN)
    # The admin side's roles: from this claim ("scope": the token's scopes), by these two values.
    oauth_roles_claim: str = Field(default="scope", min_length=1, max_length=200)
    oauth_operator_role: str = Field(default="adapter:operator", min_length=1, max_length=200)
    oauth_viewer_role: str = Field(default="adapter:viewer", min_length=1, max_length=200)
    # OpenTelemetry SERVER spans per MCP message (the SDK's middleware). Unset: on when a tracer
    # provider is configured at start-up (opentelemetry-instrument, or set in code before
    # create_app), off otherwise, since without one every span is dropped and only costs CPU.
    otel_spans: bool | None = None

    @field_validator(
        "allowed_origins",
        "allowed_hosts",
        "dashboard_allowed_origins",
        "protocol_eras",
        "oauth_algorithms",
        "trusted_proxies",
        mode="before",
    )
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip().startswith("["):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("legacy_url")
    @classmethod
    def _legacy_url(cls, value: str) -> str:
        if value != "embedded" and not value.startswith("tcp://"):
            raise ValueError("must be 'embedded' or tcp://HOST:PORT")
        return value

    @field_validator("admin_token", "admin_readonly_token")
    @classmethod
    def _admin_token(cls, value: str | None) -> str | None:
        """An admin token guards every operation of every tenant: refuse one that can be guessed."""
        if value is None:
            return None
        if len(value) < 32:
            raise ValueError("must be at least 32 characters")
        if len(set(value)) == 1:
            raise ValueError("must not be one character repeated")
        return value

    @field_validator("oauth_issuer", "oauth_audience", "oauth_introspection_url")
    @classmethod
    def _oauth_url(cls, value: str | None) -> str | None:
        """OAuth 2.1 wants TLS: https, or plain http only to a loopback host (tests, a local provider)."""
        if value is None:
            return None
        parts = urlsplit(value)
        loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
        if (
            not parts.hostname
            or parts.scheme not in ("https", "http")
            or (parts.scheme == "http" and not loopback)
        ):
            raise ValueError("must be an https:// URL (http:// only for a loopback host)")
        if parts.query or parts.fragment:
            raise ValueError("must have no query and no fragment")
        return value

    @field_validator("oauth_algorithms")
    @classmethod
    def _oauth_algorithms(cls, value: list[str]) -> list[str]:
        """Asymmetric signatures only: never ``none``, and no shared-secret HS* (a JWKS key is public)."""
        allowed = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
        wrong = [alg for alg in value if alg not in allowed]
        if wrong:
            raise ValueError(f"{wrong[0]!r} is not allowed; use some of {', '.join(sorted(allowed))}")
        return value

    @model_validator(mode="after")
    def _one_principal_cannot_fill_the_process(self) -> Settings:
        """The SDK refuses every new 2025-era session once ``legacy_max_sessions`` are open; one
        principal at its own cap must leave room for the others."""
        if self.max_legacy_sessions_per_principal >= self.legacy_max_sessions:
            raise ValueError(
                "ADAPTER_MAX_LEGACY_SESSIONS_PER_PRINCIPAL must be below ADAPTER_LEGACY_MAX_SESSIONS "
                f"({self.max_legacy_sessions_per_principal} >= {self.legacy_max_sessions})"
            )
        return self

    def quotas(self) -> Quotas:
        return Quotas(**{name: getattr(self, name) for name in Quotas.__dataclass_fields__})

    def body_limit(self) -> int:
        """Bytes of one HTTP request body (ADAPTER_MAX_BODY_BYTES): the kit's limit and the SDK's."""
        return self.max_body_bytes

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode()) < 32:
            raise ValueError("must be at least 32 bytes")
        return value

    def secret_bytes(self) -> bytes:
        """The handle secret: ADAPTER_SECRET, else the key file (see ``ensure_secret_file``). Reads only.

        Handles are derived from it, so it must stay the same across restarts and be shared by
        every worker; several workers on one database must set ADAPTER_SECRET.
        """
        if self.secret:
            return self.secret.encode()
        path = Path(self.secret_file)
        for _ in range(50):  # a process that is creating it may still be writing it
            try:
                text = path.read_text().strip()
            except FileNotFoundError:
                raise ConfigError(
                    f"invalid setting ADAPTER_SECRET_FILE: {path} does not exist (set ADAPTER_SECRET, "
                    "or start the kit once through adapter.bootstrap.build, which creates it)"
                ) from None
            if len(text) >= 64:
                return text.encode()
            time.sleep(0.01)
        raise ConfigError(f"invalid setting ADAPTER_SECRET_FILE: {path} holds no usable secret")


def ensure_secret_file(settings: Settings) -> None:
    """At start-up: when ADAPTER_SECRET is unset, create the key file once, readable by its owner only.

    Safe when several processes start at once: exactly one creates it (``O_EXCL``), the others use it.
    """
    if settings.secret:
        return
    try:
        fd = os.open(settings.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # created before, or by another process first: use that one
        return
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32))


def load_settings(**overrides: object) -> Settings:
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        if not first["loc"]:  # a rule over several settings: its message names them
            raise ConfigError(f"invalid settings: {first['msg'].removeprefix('Value error, ')}") from None
        name = "ADAPTER_" + str(first["loc"][0]).upper()
        raise ConfigError(f"invalid setting {name}: {first['msg']}") from None
    except SettingsError as exc:
        raise ConfigError(str(exc).splitlines()[0]) from None
