"""The legacy port contract kit: prove that your port keeps the promises the kit relies on.

* ``python -m adapter check-port package.module:factory [--lose-commit-reply package.module:hook]``
  prints one line per rule and exits 0 only if every rule holds;
* :class:`PortContract` (``adapter.testing.suite``, needs pytest) runs every rule in your own suite;
* :func:`run_contract` runs the rules from code and returns a :class:`RuleResult` per rule.

The rules are in :mod:`adapter.testing.contract`; ``docs/wrap-your-own-system.md`` explains each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapter.testing.contract import (
    RULES,
    ContractSubject,
    ContractViolation,
    FaultHook,
    Rule,
    RuleResult,
    run_contract,
)
from adapter.testing.samples import sample_records

if TYPE_CHECKING:
    from adapter.testing.suite import PortContract

__all__ = [
    "RULES",
    "ContractSubject",
    "ContractViolation",
    "FaultHook",
    "PortContract",
    "Rule",
    "RuleResult",
    "run_contract",
    "sample_records",
]


def __getattr__(name: str) -> Any:
    if name == "PortContract":  # imports pytest, so only when asked for
        from adapter.testing.suite import PortContract

        return PortContract
    raise AttributeError(name)
