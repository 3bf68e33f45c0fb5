"""Values every harness shares: secrets, tokens, principals, limits of patience, the databases."""

from __future__ import annotations

import os
import secrets

import pytest

from adapter.domain.identity import Principal
from adapter.services import CommitPolicy

PROTOCOL_VERSION = "2026-07-28"
TIMEOUT = 30.0
"""Seconds a test waits for a server's answer before it fails."""

SECRET = "test-secret-" + secrets.token_hex(24)
"""The kit's signing secret (handles, cursors, request state)."""
SECRET_BYTES = secrets.token_bytes(32)
"""A raw secret for codecs built without settings."""

ALICE_TOKEN = "alice-token-" + secrets.token_hex(12)
BOB_TOKEN = "bob-token-" + secrets.token_hex(12)
OPERATOR_TOKEN = "operator-" + secrets.token_hex(16)
VIEWER_TOKEN = "viewer-" + secrets.token_hex(16)

ALICE = Principal(subject="alice", tenant="acme")
BOB = Principal(subject="bob", tenant="acme")
CAROL = Principal(subject="carol", tenant="globex")

TOKENS = {
    ALICE_TOKEN: {"principal": ALICE.subject, "tenant": ALICE.tenant},
    BOB_TOKEN: {"principal": BOB.subject, "tenant": BOB.tenant},
}
"""The MCP token file's contents: bearer token -> principal."""

UNMETERED = {
    "max_stage_bytes_per_second_per_principal": 1 << 40,
    "max_stage_records_per_second_per_principal": 1 << 30,
    "max_stage_bytes_per_second_per_tenant": 1 << 40,
    "max_stage_records_per_second_per_tenant": 1 << 30,
}
"""Staging rates no test reaches: a test of something else stages as fast as it likes; the tests of
the rates set their own (``tests/core/test_staging_rates.py``)."""

UNMETERED_HTTP = {
    "max_request_bytes_per_second_per_principal": 1 << 40,
    "max_json_elements_per_second_per_principal": 1 << 40,
    "max_requests_per_second_per_principal": 1 << 30,
}
"""The same for what HTTP requests may cost a principal (``tests/mcp/test_caller_limits.py``)."""

FAST_RETRIES = CommitPolicy(retry_wait_initial=0.001, retry_wait_max=0.01)
"""Commit retries in milliseconds: tests prove how many attempts happen, not how long they wait."""

POSTGRES_URL = os.environ.get("ADAPTER_TEST_POSTGRES_URL")
POSTGRES = pytest.param(
    "postgres",
    marks=[
        pytest.mark.postgres,
        pytest.mark.skipif(not POSTGRES_URL, reason="ADAPTER_TEST_POSTGRES_URL not set"),
    ],
)
"""The ``db_url`` parameter for PostgreSQL; a test for PostgreSQL alone parametrizes with ``[POSTGRES]``
(a bare ``"postgres"`` loses the ``postgres`` mark, so ``-m postgres`` misses it; without the variable
it still skips at set-up, through ``tests.support.postgres.require_postgres``)."""
