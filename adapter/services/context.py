"""What every use case needs, built once by ``adapter.bootstrap`` and passed in (no globals)."""

from __future__ import annotations

import os
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from adapter.domain.confirmation import ConfirmationRules
from adapter.domain.cursors import CursorCodec
from adapter.domain.identity import HandleCodec
from adapter.domain.quotas import Quotas
from adapter.domain.records import Limits
from adapter.ports.legacy import LegacyPort
from adapter.ports.targets import ANY_TARGET
from adapter.services.targets import TargetRules
from adapter.store import Store
from adapter.store.tables import utcnow

__all__ = ["CancelToken", "CommitPolicy", "ProgressCallback", "ServiceContext", "default_worker_id"]

ProgressCallback = Callable[[float, int], None]
"""Called with (progress, records total) while a commit replays records into the legacy system.

The whole part of ``progress`` is the number of records the legacy system has taken; a fraction
means a chunk is still with it (see ``adapter.services.progress``)."""


class CancelToken:
    """Tells a running commit to stop before COMMIT; it checks between records and just before COMMIT.

    ``cancel()``: its caller went away before the answer, or its owner asked it to stop (the run
    then records the outcome). ``hand_over()``: the worker is shutting down; the run stops without
    recording an outcome and frees its lease, so another worker resumes it at once.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._hand_over = False

    def cancel(self) -> None:
        self._event.set()

    def hand_over(self) -> None:
        self._hand_over = True
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() and not self._hand_over

    @property
    def handing_over(self) -> bool:
        return self._hand_over

    @property
    def stopping(self) -> bool:
        """Either: the run must not go on."""
        return self._event.is_set()


@dataclass(frozen=True, slots=True)
class CommitPolicy:
    """Tuning of the commit flow. Retries are bounded and jittered; leases are short."""

    chunk_size: int = 500
    max_attempts: int = 4
    retry_wait_initial: float = 0.05
    retry_wait_max: float = 2.0
    lease_seconds: float = 30.0
    unknown_grace_seconds: float = 30.0
    """How long after COMMIT was sent "not committed" may be believed: a slow legacy system can
    still apply a COMMIT whose reply we stopped waiting for. Keep it above the legacy timeout."""
    progress_pulse_seconds: float = 0.5
    """While a chunk is with the legacy system, progress is reported this often (a person watches)."""
    stop_check_seconds: float = 0.25
    """How long the legacy system may work on the records of one hand-over before the run checks
    again whether it must stop: records go out in pieces sized to take about this long."""
    wait_seconds: float = 4.0
    """How long a request waits for a commit (or a status change) before it answers ``in_progress``
    (``ADAPTER_COMMIT_WAIT_SECONDS``); below the shortest common client timeout."""


class ImportTargets:
    """The target of each import this worker began or added to lately, by handle digest.

    An import's target never changes, so a later add can check its records against the target's
    schema before its one statement (``staging.py``'s add on its own). Bounded: when full it starts
    afresh, and a forgotten import takes the checked path once."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._by_digest: dict[str, str] = {}

    def get(self, digest: str) -> str | None:
        return self._by_digest.get(digest)

    def remember(self, digest: str, target: str) -> None:
        if len(self._by_digest) >= self._size:
            self._by_digest.clear()
        self._by_digest[digest] = target


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass(slots=True)
class ServiceContext:
    store: Store
    legacy: LegacyPort
    codec: HandleCodec
    cursors: CursorCodec
    limits: Limits = field(default_factory=Limits)
    commit_policy: CommitPolicy = field(default_factory=CommitPolicy)
    quotas: Quotas = field(default_factory=Quotas)
    default_ttl_seconds: int = 3600
    worker_id: str = field(default_factory=default_worker_id)
    clock: Callable[[], datetime] = utcnow
    targets: TargetRules = field(default_factory=lambda: TargetRules((ANY_TARGET,)))
    """The port's targets with their compiled record schemas (begin and add check them)."""
    confirmation: ConfirmationRules = field(default_factory=ConfirmationRules)
    """Who is asked before a commit, how often and for how long (``ADAPTER_CONFIRM_*``)."""
    task_ttl_seconds: float = 7 * 86_400.0
    """How long a commit stays readable as a task: until retention may purge it."""
    import_targets: ImportTargets = field(default_factory=ImportTargets)
    """Recently seen imports' targets (the add on its own checks records against them first)."""
