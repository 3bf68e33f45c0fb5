"""Quotas: how much one import, principal or tenant may hold or run at once, or stage a second.

Every quota refuses *new* work with ``quota_exceeded`` and a message naming the setting and its
value; nothing already accepted is failed or dropped because a quota was reached. The defaults are
safe for a small shared server; ``docs/operations.md`` lists the settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.domain.errors import QuotaExceeded  # the error tree holds it; re-exported here

__all__ = ["QuotaExceeded", "Quotas"]

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Quotas:
    max_records_per_import: int = 100_000
    max_import_bytes: int = 256 * MIB
    max_open_imports_per_principal: int = 100
    max_staged_bytes_per_tenant: int = 2048 * MIB
    max_commits_per_tenant: int = 4
    legacy_sessions: int = 16
    max_listens_per_principal: int = 8
    max_legacy_sessions_per_principal: int = 32
    max_stage_bytes_per_second_per_principal: int = 8 * MIB
    max_stage_records_per_second_per_principal: int = 20_000
    max_stage_bytes_per_second_per_tenant: int = 16 * MIB
    max_stage_records_per_second_per_tenant: int = 40_000
    max_uris_per_listen: int = 100
    delete_batch_size: int = 2000
