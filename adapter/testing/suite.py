"""The port contract as pytest tests for your own suite.

    from adapter.testing import PortContract

    class TestMyPort(PortContract):
        @pytest.fixture
        def port(self):                       # required: the port under test
            port = make_my_port()
            yield port
            port.close()

        @pytest.fixture
        def lose_commit_reply(self):          # the fault hooks: without one, its rule is skipped
            return my_fault_hook

        @pytest.fixture
        def system_down(self):
            return my_outage_hook

Every rule of :data:`adapter.testing.contract.RULES` becomes one test, ``test_port_contract[rule]``.
Override ``contract_target`` (a fixture returning a target name), ``contract_samples`` (a fixture
returning sample records or parts of records, merged over the generated ones, e.g. read from the JSON
file you give ``check-port --records``) or ``contract_records`` (a method ``(start, count) -> records``)
when the defaults do not fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from adapter.testing.contract import RULES, ContractSubject, FaultHook, Rule, RuleSkipped

__all__ = ["PortContract"]


class PortContract:
    """Mix into a test class that provides a ``port`` fixture."""

    contract_records: Any = None

    @pytest.fixture
    def lose_commit_reply(self) -> FaultHook | None:
        return None

    @pytest.fixture
    def system_down(self) -> FaultHook | None:
        return None

    @pytest.fixture
    def contract_target(self) -> str:
        return ""

    @pytest.fixture
    def contract_samples(self) -> Sequence[Mapping[str, Any]] | None:
        return None

    @pytest.fixture
    def contract_subject(
        self,
        port: Any,
        lose_commit_reply: FaultHook | None,
        system_down: FaultHook | None,
        contract_target: str,
        contract_samples: Sequence[Mapping[str, Any]] | None,
    ) -> ContractSubject:
        return ContractSubject(
            port,
            contract_target,
            lose_commit_reply=lose_commit_reply,
            records=self.contract_records,
            system_down=system_down,
            samples=contract_samples,
        )

    @pytest.mark.parametrize("rule", RULES, ids=[rule.name for rule in RULES])
    def test_port_contract(self, contract_subject: ContractSubject, rule: Rule) -> None:
        try:
            rule.check(contract_subject)
        except RuleSkipped as exc:
            pytest.skip(str(exc))
