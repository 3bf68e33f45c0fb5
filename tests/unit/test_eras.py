"""The era setting and the refusal it produces (``adapter/entrypoints/mcp/eras.py``)."""

from __future__ import annotations

import pytest

from adapter.config import ConfigError, load_settings
from adapter.entrypoints.mcp.eras import answer_versions, era_of, refusal_error, served_versions

HANDSHAKE = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


def test_both_eras_are_served_by_default_and_a_comma_list_chooses() -> None:
    assert load_settings().protocol_eras == ["modern", "legacy"]
    assert load_settings(protocol_eras="modern").protocol_eras == ["modern"]
    assert load_settings(protocol_eras=" legacy , modern ").protocol_eras == ["legacy", "modern"]


@pytest.mark.parametrize("value", ["", "modern,ancient", "2025-11-25"])
def test_a_bad_era_setting_stops_start_up_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="ADAPTER_PROTOCOL_ERAS"):
        load_settings(protocol_eras=value)


def test_versions_are_listed_modern_first_newest_first() -> None:
    assert served_versions(["legacy", "modern"]) == ["2026-07-28", *HANDSHAKE]
    assert served_versions(["legacy"]) == HANDSHAKE
    assert era_of("2026-07-28") == "modern"
    assert era_of("2025-06-18") == era_of(None) == "legacy"


@pytest.mark.parametrize(
    ("eras", "requested", "supported"),
    [
        (["modern"], "2025-11-25", ["2026-07-28"]),  # the handshake, modern-only
        (["legacy"], "2026-07-28", HANDSHAKE),  # a 2026 request, legacy-only
        (["modern", "legacy"], "2099-01-01", ["2026-07-28"]),  # unknown: what server/discover lists
        (["legacy"], "2099-01-01", HANDSHAKE),
        (["modern"], None, ["2026-07-28"]),
    ],
)
def test_the_refusal_lists_what_the_client_can_switch_to(
    eras: list[str], requested: str | None, supported: list[str]
) -> None:
    error = refusal_error(eras, requested)
    assert error["code"] == -32022
    assert error["data"] == {"supported": supported, "requested": requested}
    assert answer_versions(eras, requested) == supported
    for version in served_versions(eras):  # the message names every served version
        assert version in error["message"]
    assert (requested or "(none)") in error["message"]
