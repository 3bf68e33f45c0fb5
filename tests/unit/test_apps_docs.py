"""The docs about the MCP Apps view hold: the README shows its screenshot, and docs/state-matrix.md
lists every read the view makes (the tools it calls and the URIs it reads, as ``apps.py`` and the
view's script name them)."""

from __future__ import annotations

import re
from pathlib import Path

from adapter.entrypoints.mcp.apps import CALLED_TOOLS, REVIEW_SUFFIX, VIEW_TOOLS

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_shows_a_small_screenshot_of_the_view() -> None:
    readme = (ROOT / "README.md").read_text()
    [image] = re.findall(r"!\[[^\]]*\]\((docs/[\w.-]+\.png)\)", readme)
    data = (ROOT / image).read_bytes()

    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) < 64 * 1024


def test_the_state_matrix_lists_the_views_reads() -> None:
    matrix = (ROOT / "docs" / "state-matrix.md").read_text()
    section = matrix.split("### MCP Apps", 1)[1].split("\n### ", 1)[0]
    script = (ROOT / "apps" / "view" / "review.js").read_text()

    for name in CALLED_TOOLS:
        assert f"`tools/call` `{name}`" in section or f"`{name}` (" in section, name
        assert f"tools.{name}" in script, name  # and the view calls no other tool
    assert set(re.findall(r"tools\.(\w+)", script)) == set(CALLED_TOOLS)
    assert "`resources/read` `ui://{server name}/import-review`" in section
    assert f"`resources/read` `import://{{handle}}{REVIEW_SUFFIX}?after=N&size=M`" in section
    assert "readServerResource" in script and script.count("readServerResource") == 1
    assert all(f"`{name}`" in section for name in VIEW_TOOLS)
