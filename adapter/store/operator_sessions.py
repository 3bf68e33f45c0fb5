"""The repository of dashboard sessions (``operator_sessions``); see adapter/services/operator_sessions.py."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from adapter.store.tables import OperatorSessionRow

__all__ = ["OperatorSessionRepository"]


class OperatorSessionRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, id_hash: str, role: str, created_at: datetime, expires_at: datetime) -> None:
        self.session.add(
            OperatorSessionRow(id_hash=id_hash, role=role, created_at=created_at, expires_at=expires_at)
        )

    def get(self, id_hash: str) -> OperatorSessionRow | None:
        return self.session.execute(
            select(OperatorSessionRow).where(OperatorSessionRow.id_hash == id_hash)
        ).scalar_one_or_none()

    def delete(self, id_hash: str) -> None:
        self.session.execute(delete(OperatorSessionRow).where(OperatorSessionRow.id_hash == id_hash))

    def purge_expired(self, now: datetime) -> None:
        self.session.execute(delete(OperatorSessionRow).where(OperatorSessionRow.expires_at <= now))
