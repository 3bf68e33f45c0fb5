"""The tutorial shows the example code that is tested, not a copy that can drift."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_erp_port_in_the_tutorial_is_the_tested_file() -> None:
    doc = (REPO / "docs" / "wrap-your-own-system.md").read_text()
    marker = "`examples/acme_erp/port.py`:\n\n```python\n"
    start = doc.index(marker) + len(marker)
    shown = doc[start : doc.index("```\n", start)]

    assert shown == (REPO / "examples" / "acme_erp" / "port.py").read_text()


def test_the_tutorial_names_only_commands_that_exist() -> None:
    from adapter.entrypoints.cli import _parser

    doc = (REPO / "docs" / "wrap-your-own-system.md").read_text()
    commands = set(_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    used = {line.split()[1] for line in doc.splitlines() if line.startswith("legacy-adapter ")}
    assert used and used <= commands | {"--help"}, used - commands


def test_the_contract_tests_in_the_tutorial_are_what_new_port_writes(tmp_path: Path) -> None:
    from adapter.entrypoints.scaffold import write_package

    doc = (REPO / "docs" / "wrap-your-own-system.md").read_text()
    marker = (
        "wrote it (every rule becomes one test; it imports only your factory and fault hooks):\n\n```python\n"
    )
    start = doc.index(marker) + len(marker)
    shown = doc[start : doc.index("```\n", start)]

    assert shown == (write_package("acme_erp", tmp_path) / "test_port.py").read_text()
