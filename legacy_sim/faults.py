"""Fault knobs of the simulator and the seeded dice that apply them.

The kit's safety rests on how it handles a slow, flaky, reply-losing legacy system, so the simulator
can be made exactly that, reproducibly (``seed``), and the knobs can be turned at run time (the
``FAULTS`` command, or :meth:`legacy_sim.engine.LegacyEngine.update_faults` in-process).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

__all__ = ["FaultInjector", "Faults"]


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Faults:
    """Fault knobs.

    * ``latency_ms``: sleep before every command (including FAULTS and PING).
    * ``error_rate``: probability that any command except FAULTS/PING fails with ``ERR TRANSIENT``
      before doing anything.
    * ``drop_after_commit``: probability that COMMIT is applied and the connection is then dropped
      without a reply (the "unknown outcome" case).
    * ``seed``: seed of the dice; ``None`` means unseeded.
    """

    latency_ms: float = 0
    error_rate: float = 0.0
    drop_after_commit: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not _is_number(self.latency_ms) or self.latency_ms < 0:
            raise ValueError(f"latency_ms must be a number >= 0, got {self.latency_ms!r}")
        for name in ("error_rate", "drop_after_commit"):
            value = getattr(self, name)
            if not _is_number(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in 0..1, got {value!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ValueError(f"seed must be an integer or null, got {self.seed!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def updated(self, changes: Mapping[str, Any]) -> Faults:
        """A copy with ``changes`` applied; ``ValueError`` for unknown knobs or bad values."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(
                f"unknown fault knob(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return replace(self, **dict(changes))


class FaultInjector:
    """Thread-safe holder of the current knobs and the seeded dice all sessions of an engine share.

    Dice are only rolled when the matching knob is non-zero, so a seeded sequence of errors does not
    depend on whether other knobs are on.
    """

    def __init__(self, faults: Faults | None = None) -> None:
        self._lock = threading.Lock()
        self._faults = faults or Faults()
        self._rng = random.Random(self._faults.seed)

    @property
    def current(self) -> Faults:
        return self._faults

    def update(self, changes: Mapping[str, Any]) -> Faults:
        """Apply knob changes; a ``seed`` key (even the same value) restarts the dice from that seed."""
        with self._lock:
            new = self._faults.updated(changes)
            self._faults = new
            if "seed" in changes:
                self._rng = random.Random(new.seed)
            return new

    def latency_seconds(self) -> float:
        return self._faults.latency_ms / 1000.0

    def roll_error(self) -> bool:
        """True if this command must fail with TRANSIENT."""
        with self._lock:
            rate = self._faults.error_rate
            return rate > 0 and self._rng.random() < rate

    def roll_drop_after_commit(self) -> bool:
        """True if this (already applied) commit must lose its reply."""
        with self._lock:
            rate = self._faults.drop_after_commit
            return rate > 0 and self._rng.random() < rate
