"""docs/operations.md tells the truth about the settings and the entry points: every setting has one
row, whose bounds are the code's, and what the guide says about ports and pages holds."""

from __future__ import annotations

import re
from pathlib import Path

import annotated_types as at

from adapter.config import Settings

DOC = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
ROW = re.compile(r"^\| ((?:`ADAPTER_[A-Z_]+`(?:, )?)+) \|([^|]*)\|([^|]*)\|", re.MULTILINE)


def _rows() -> dict[str, list[str]]:
    """Setting name -> the bounds column of each row naming it."""
    rows: dict[str, list[str]] = {}
    for names, _default, bounds in ROW.findall(DOC):
        for name in re.findall(r"`(ADAPTER_[A-Z_]+)`", names):
            rows.setdefault(name, []).append(bounds.strip())
    return rows


def test_every_setting_has_exactly_one_row() -> None:
    rows = _rows()

    assert {name: len(found) for name, found in rows.items() if len(found) > 1} == {}
    assert (
        sorted(
            f"ADAPTER_{name.upper()}"
            for name in Settings.model_fields
            if f"ADAPTER_{name.upper()}" not in rows
        )
        == []
    )


def test_the_documented_bounds_are_the_codes() -> None:
    rows = _rows()
    wrong = []
    for name, field in Settings.model_fields.items():
        [bounds] = rows[f"ADAPTER_{name.upper()}"]
        for limit in field.metadata:
            value = getattr(limit, "ge", None) if isinstance(limit, at.Ge) else getattr(limit, "le", None)
            if value is not None and f"{value:g}" not in bounds.replace(",", "") and str(value) not in bounds:
                wrong.append(f"ADAPTER_{name.upper()}: {value} not in {bounds!r}")
    assert wrong == []


def test_the_guide_does_not_say_the_entry_points_always_use_the_simulator() -> None:
    assert "always use the simulator" not in DOC
    assert "see the API reference at /docs" not in DOC  # /docs is off unless ADAPTER_API_DOCS=true
