"""The port contract as pytest tests for your own suite.

    from adapter.testing import PortContract

    class TestMyPort(PortContract):
        @pytest.fixture
        def port(self):                       # required: the port under test
            port = make_my_port()
            yield port
            port.close()

        @pytest.fixture
        def lose_commit_reply(self):          # optional: the fault hook (else that rule is skipped)
            return my_fault_hook

Every rule of :data:`adapter.testing.contract.RULES` becomes one test, ``test_port_contract[rule]``.
Override ``contract_target`` (a fixture returning a target name) or ``contract_records`` (a method
``(start, count) -> records``) when the defaults do not fit.
"""

from __future__ import annotations

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
    def contract_target(self) -> str:
        return ""

    @pytest.fixture
    def contract_subject(
        self, port: Any, lose_commit_reply: FaultHook | None, contract_target: str
    ) -> ContractSubject:
        return ContractSubject(
            port, contract_target, lose_commit_reply=lose_commit_reply, records=self.contract_records
        )

    @pytest.mark.parametrize("rule", RULES, ids=[rule.name for rule in RULES])
    def test_port_contract(self, contract_subject: ContractSubject, rule: Rule) -> None:
        try:
            rule.check(contract_subject)
        except RuleSkipped as exc:
            pytest.skip(str(exc))
