"""A unit of work: one database transaction that rolls back unless committed.

Services open one per step (``with store.unit_of_work() as uow: ...; uow.commit()``). Repositories
hang off it so a service never builds queries itself.
"""

from __future__ import annotations

from types import TracebackType

from sqlalchemy.orm import Session, sessionmaker

from adapter.store.repositories import (
    CompensationRepository,
    ConfirmationRepository,
    EventRepository,
    ImportRepository,
    OperationRepository,
    RecordRepository,
)

__all__ = ["UnitOfWork"]


class UnitOfWork:
    session: Session

    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        self._session_factory = session_factory

    def __enter__(self) -> UnitOfWork:
        self.session = self._session_factory()
        self.imports = ImportRepository(self.session)
        self.records = RecordRepository(self.session)
        self.operations = OperationRepository(self.session)
        self.compensations = CompensationRepository(self.session)
        self.events = EventRepository(self.session)
        self.confirmations = ConfirmationRepository(self.session)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # close() rolls back anything not committed; unlike rollback() it leaves the loaded
        # attributes of returned rows readable after the block.
        self.session.close()

    def commit(self) -> None:
        self.session.commit()

    def flush(self) -> None:
        self.session.flush()
