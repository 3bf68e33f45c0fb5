"""The operator dashboard (/admin/ui): a real browser, and its auth and CSRF rules over plain HTTP.

The app is the real one (``create_app``) served by uvicorn on a free loopback port, in a thread so a
blocking client (httpx, Selenium) can drive it. Its data comes from the real ImportService against
the simulator over TCP: committed imports, one commit whose outcome is unknown (the reply to COMMIT
is dropped) and one compensation that keeps failing (needs_operator).

The browser test drives headless Chromium from Debian packages (/usr/bin/chromium and
/usr/bin/chromedriver; ``.ci/run`` installs them) with Selenium, and saves screenshots under
``test-output/dashboard/``. Without the packages it is skipped, saying so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter.bootstrap import Kit, build
from adapter.domain.identity import Principal
from adapter.entrypoints.http.app import create_app
from adapter.store import Store
from legacy_sim.engine import LegacyEngine
from tests.support.constants import ALICE, CAROL, OPERATOR_TOKEN, VIEWER_TOKEN
from tests.support.kit import kit_settings, running_kit
from tests.support.servers import serve_in_thread

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "dashboard"
UI = "/admin/ui"


# --- the app, served -------------------------------------------------------------------------------


@pytest.fixture
def admin_tokens() -> dict[str, Any]:
    return {"admin_token": OPERATOR_TOKEN, "admin_readonly_token": VIEWER_TOKEN}


@pytest.fixture
def ui_kit(
    store: Store, db_url: str, legacy_address: tuple[str, int], tmp_path: Path, admin_tokens: dict[str, Any]
) -> Iterator[Kit]:
    settings = kit_settings(
        db_url, legacy_address, tmp_path, tokens=None, unknown_grace_seconds=0.0, **admin_tokens
    )
    with running_kit(settings, store) as kit:
        yield kit


@dataclasses.dataclass
class Seeded:
    committed: list[str]  # commit operation ids
    unknown: str  # the commit operation whose outcome is unknown
    needs_operator: str  # the compensate operation that needs an operator
    total: int


def seed(kit: Kit, legacy: LegacyEngine) -> Seeded:
    """Data made the way clients make it: through the ImportService, against the TCP simulator."""
    service = kit.service

    def staged(who: Principal, target: str, n: int) -> str:
        handle = service.begin(who, target).handle
        service.add(who, handle, [{"n": i, "name": f"row {i}"} for i in range(n)])
        return handle

    committed = []
    for i in range(3):
        result = service.commit(ALICE, staged(ALICE, "customers", 3 + i), idempotency_key=f"nightly-{i}")
        assert result.status == "committed"
        committed.append(result.operation_id)

    legacy.update_faults(drop_after_commit=1.0)
    unknown = service.commit(CAROL, staged(CAROL, "suppliers", 4), idempotency_key="carol-1")
    legacy.update_faults(drop_after_commit=0.0)
    assert unknown.status == "outcome_unknown"

    handle = staged(ALICE, "orders", 2)
    service.commit(ALICE, handle)
    import_id = service.status(ALICE, handle).import_id
    legacy.update_faults(error_rate=1.0)
    try:
        assert service.compensate(import_id, reason="wrong file") == "compensating"
    finally:
        legacy.update_faults(error_rate=0.0)
    [needs_operator] = [
        op
        for op in kit.admin.list_operations(_filter(status="needs_operator")).items
        if op.kind == "compensate"
    ]
    total = sum(kit.admin.status_counts().values())
    return Seeded(committed, unknown.operation_id, needs_operator.operation_id, total)


def _filter(**values: Any) -> Any:
    from adapter.services.admin import OperationFilter

    return OperationFilter(**values)


@pytest.fixture
def base_url(ui_kit: Kit) -> Iterator[str]:
    # No maintenance loop: it would reconcile the unknown outcome before the operator can.
    with serve_in_thread(create_app(ui_kit, run_maintenance=False)) as url:
        yield url


@pytest.fixture
def seeded(ui_kit: Kit, legacy_engine: LegacyEngine) -> Seeded:
    return seed(ui_kit, legacy_engine)


def http(base_url: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, follow_redirects=False, timeout=30.0)


@contextlib.contextmanager
def logged_in(base_url: str, token: str) -> Iterator[httpx.Client]:
    with http(base_url) as client:
        response = client.post(f"{UI}/login", data={"token": token}, headers={"Origin": base_url})
        assert response.status_code == 303, response.text
        yield client


def count_on_card(html: str, state: str) -> int:
    match = re.search(rf'data-count="{state}">\s*<span class="count">(\d+)</span>', html)
    assert match, f"no card for {state}"
    return int(match.group(1))


def rows(html: str) -> list[tuple[str, str]]:
    """(operation id, status) of each row of the operations table."""
    return re.findall(r'<tr data-operation="([^"]+)" data-status="([^"]+)">', html)


# --- plain HTTP: auth, roles, CSRF -----------------------------------------------------------------


@pytest.mark.parametrize("admin_tokens", [{}])
def test_without_an_admin_token_the_dashboard_does_not_exist(base_url: str) -> None:
    with http(base_url) as client:
        for path in (UI, f"{UI}/login", f"{UI}/static/dashboard.css", f"{UI}/operations/x"):
            assert client.get(path).status_code == 404, path
        response = client.post(f"{UI}/login", data={"token": "x" * 20}, headers={"Origin": base_url})
        assert response.status_code == 404


def test_a_visit_without_a_valid_cookie_is_sent_to_the_login_page(base_url: str, seeded: Seeded) -> None:
    with http(base_url) as client:
        response = client.get(UI)
        assert response.status_code == 303
        assert response.headers["location"] == f"{UI}/login"
        response = client.get(f"{UI}/operations/{seeded.unknown}")
        assert response.status_code == 303
        assert response.headers["location"].startswith(f"{UI}/login?next=%2Fadmin%2Fui%2Foperations%2F")

        client.cookies.set("adapter_admin", "not-a-token-of-this-kit", path="/admin")
        assert client.get(UI).status_code == 303

        page = client.get(f"{UI}/login")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert 'name="token"' in page.text and 'type="password"' in page.text
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        css = client.get(f"{UI}/static/dashboard.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_login_sets_a_strict_httponly_cookie_and_logout_clears_it(base_url: str, seeded: Seeded) -> None:
    with http(base_url) as client:
        wrong = client.post(f"{UI}/login", data={"token": "x" * 32}, headers={"Origin": base_url})
        assert wrong.status_code == 401
        assert "not valid" in wrong.text and "set-cookie" not in wrong.headers

        ok = client.post(
            f"{UI}/login",
            data={"token": OPERATOR_TOKEN, "next": f"{UI}/operations/{seeded.unknown}"},
            headers={"Origin": base_url},
        )
        assert ok.status_code == 303
        assert ok.headers["location"] == f"{UI}/operations/{seeded.unknown}"
        cookie = ok.headers["set-cookie"]
        assert cookie.startswith(f"adapter_admin={OPERATOR_TOKEN};")
        attributes = {part.strip().lower() for part in cookie.split(";")}
        assert {"httponly", "samesite=strict", "path=/admin"} <= attributes
        assert "secure" not in attributes  # plain HTTP on loopback: a Secure cookie would not come back

        overview = client.get(UI)
        assert overview.status_code == 200
        assert count_on_card(overview.text, "outcome_unknown") == 1
        assert count_on_card(overview.text, "needs_operator") == 1
        assert count_on_card(overview.text, "succeeded") >= 3

        out = client.post(f"{UI}/logout", headers={"Origin": base_url})
        assert out.status_code == 303 and out.headers["location"].startswith(f"{UI}/login")
        assert 'adapter_admin=""' in out.headers["set-cookie"] and "Max-Age=0" in out.headers["set-cookie"]
        assert client.get(UI).status_code == 303


def test_login_never_redirects_to_another_site(base_url: str) -> None:
    with http(base_url) as client:
        for target in ("https://evil.example/", "//evil.example/admin/ui", "/elsewhere", r"/admin/ui\@evil"):
            response = client.post(
                f"{UI}/login", data={"token": VIEWER_TOKEN, "next": target}, headers={"Origin": base_url}
            )
            assert response.status_code == 303
            assert response.headers["location"] == UI, target


def test_a_viewer_sees_no_action_buttons_and_may_not_act(base_url: str, seeded: Seeded, ui_kit: Kit) -> None:
    with logged_in(base_url, VIEWER_TOKEN) as client:
        page = client.get(f"{UI}/operations/{seeded.unknown}")
        assert page.status_code == 200
        assert 'id="read-only"' in page.text
        for action in ("reconcile", "compensate", "resolve"):
            assert f'/{action}"' not in page.text
            refused = client.post(
                f"{UI}/operations/{seeded.unknown}/{action}",
                data={"reason": "r"},
                headers={"Origin": base_url},
            )
            assert refused.status_code == 403, action
    detail = ui_kit.admin.get_operation(seeded.unknown)
    assert detail.operation.status == "outcome_unknown" and detail.audit == []


def test_cross_site_posts_are_refused(base_url: str, seeded: Seeded, ui_kit: Kit) -> None:
    target = f"{UI}/operations/{seeded.unknown}/reconcile"
    with logged_in(base_url, OPERATOR_TOKEN) as client:
        assert client.post(target, headers={"Origin": "http://evil.example"}).status_code == 403
        assert client.post(target, headers={"Origin": "null"}).status_code == 403
        assert client.post(target, headers={"Referer": "http://evil.example/page"}).status_code == 403
        assert client.post(target).status_code == 403  # neither header: refused too
        port = base_url.rsplit(":", 1)[1]
        assert client.post(target, headers={"Origin": f"http://localhost:{port}"}).status_code == 403
        assert ui_kit.admin.get_operation(seeded.unknown).audit == []
        assert client.post(f"{UI}/logout", headers={"Origin": "http://evil.example"}).status_code == 403

        # Our own form: the browser sends the Referer of the page (Referrer-Policy: same-origin).
        done = client.post(target, headers={"Referer": f"{base_url}{UI}/operations/{seeded.unknown}"})
        assert done.status_code == 303
        assert done.headers["location"] == f"{UI}/operations/{seeded.unknown}?done=reconcile"
    with http(base_url) as client:
        login = client.post(
            f"{UI}/login", data={"token": OPERATOR_TOKEN}, headers={"Origin": "http://evil.example"}
        )
        assert login.status_code == 403 and "set-cookie" not in login.headers
    detail = ui_kit.admin.get_operation(seeded.unknown)
    assert detail.operation.status == "succeeded"
    assert [(a.actor, a.action) for a in detail.audit] == [("operator", "reconcile")]


def test_resolve_needs_a_reason_and_the_flash_comes_from_the_audit_trail(
    base_url: str, seeded: Seeded, ui_kit: Kit
) -> None:
    target = f"{UI}/operations/{seeded.needs_operator}"
    with logged_in(base_url, OPERATOR_TOKEN) as client:
        page = client.get(target)
        assert "This operation needs an operator" in page.text
        assert 'id="compensation"' in page.text and "wrong file" in page.text

        no_reason = client.post(f"{target}/resolve", data={"reason": "  "}, headers={"Origin": base_url})
        assert no_reason.status_code == 400
        assert "Resolve refused" in no_reason.text and "needs a reason" in no_reason.text

        resolved = client.post(
            f"{target}/resolve",
            data={"reason": "voided by hand in the legacy console"},
            headers={"Origin": base_url},
        )
        assert resolved.status_code == 303
        page = client.get(resolved.headers["location"])
        assert 'id="flash"' in page.text and "Resolve: resolved" in page.text
        assert "voided by hand in the legacy console" in page.text
        assert re.search(r'id="op-status"><span class="badge tone-ok" data-status="resolved">', page.text)

        # A link cannot put words in the flash: it only names an action, whose outcome is audited.
        crafted = client.get(f"{UI}/operations/{seeded.unknown}", params={"done": "reconcile"})
        assert 'id="flash"' not in crafted.text
        injected = client.get(target, params={"done": "<b>call 555</b>"})
        assert 'id="flash"' not in injected.text and "call 555" not in injected.text

        unconfirmed = client.post(
            f"{UI}/operations/{seeded.committed[0]}/compensate", headers={"Origin": base_url}
        )
        assert unconfirmed.status_code == 400 and "confirm" in unconfirmed.text
    assert ui_kit.admin.get_operation(seeded.committed[0]).audit == []


def test_an_empty_kit_shows_empty_states(base_url: str) -> None:
    with logged_in(base_url, OPERATOR_TOKEN) as client:
        page = client.get(UI)
        assert page.status_code == 200
        assert "No operations yet." in page.text and rows(page.text) == []
        assert count_on_card(page.text, "needs_operator") == 0
        assert re.search(r'id="total">0<', page.text)
        assert "nothing is waiting to be resolved" in page.text
        assert 'id="next-page"' not in page.text


def test_filters_and_keyset_pages(base_url: str, seeded: Seeded) -> None:
    with logged_in(base_url, VIEWER_TOKEN) as client:
        unknown = client.get(UI, params={"status": "outcome_unknown", "principal": "", "kind": ""})
        assert rows(unknown.text) == [(seeded.unknown, "outcome_unknown")]
        assert client.get(UI, params={"idempotency_key": "nightly-1"}).text.count("<tr data-operation") == 1
        assert rows(client.get(UI, params={"tenant": "globex"}).text)  # carol's operations
        none = client.get(UI, params={"principal": "nobody"})
        assert rows(none.text) == [] and "No operation matches these filters." in none.text

        seen: list[str] = []
        url: str | None = f"{UI}?limit=4"
        while url:
            page = client.get(url.replace("&amp;", "&"))
            assert page.status_code == 200
            seen += [operation_id for operation_id, _ in rows(page.text)]
            found = re.search(r'href="([^"]+)" id="next-page"', page.text)
            url = found.group(1) if found else None
        assert len(seen) == len(set(seen)) == seeded.total  # every operation once, newest first

        stale = client.get(UI, params={"cursor": "not-a-cursor"})
        assert stale.status_code == 200 and "no longer valid" in stale.text
        missing = client.get(f"{UI}/operations/no-such-operation")
        assert missing.status_code == 404 and "No such operation" in missing.text


# --- errors: the admin API's statuses, the code once --------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(params=["sqlite-missing-dir", "postgres-closed-port"])
def down_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database that does not answer: a SQLite file that cannot be opened, a port nobody listens on."""
    if request.param == "sqlite-missing-dir":
        return f"sqlite:///{tmp_path / 'gone' / 'adapter.db'}"
    return f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/adapter?connect_timeout=5"


def test_a_database_that_does_not_answer_is_a_503_page_not_a_500(
    down_url: str, legacy_address: tuple[str, int], tmp_path: Path
) -> None:
    kit = build(kit_settings(down_url, legacy_address, tmp_path, tokens=None, admin_token=OPERATOR_TOKEN))
    try:
        with (
            serve_in_thread(create_app(kit, run_maintenance=False)) as url,
            logged_in(url, OPERATOR_TOKEN) as client,
        ):
            api = client.get("/admin/operations", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
            assert api.status_code == 503, api.text
            assert api.json()["code"] == "database_unavailable"
            for page in (client.get(UI), client.get(f"{UI}/operations/some-id")):
                assert page.status_code == 503, page.text
                assert "Cannot show this page" in page.text
                assert page.text.count("database_unavailable") == 1  # the code once, not twice
            acted = client.post(
                f"{UI}/operations/some-id/reconcile", data={"reason": "x"}, headers={"Origin": url}
            )
            assert acted.status_code == 503 and acted.text.count("database_unavailable") == 1
    finally:
        kit.close()


def test_a_failing_legacy_system_is_the_same_status_in_the_dashboard_as_in_the_api(
    base_url: str, seeded: Seeded, ui_kit: Kit, legacy_engine: LegacyEngine
) -> None:
    target = f"{UI}/operations/{seeded.unknown}/reconcile"
    legacy_engine.update_faults(error_rate=1.0)
    try:
        with logged_in(base_url, OPERATOR_TOKEN) as client:
            page = client.post(target, data={"reason": "try now"}, headers={"Origin": base_url})
            api = client.post(
                f"/admin/operations/{seeded.unknown}/reconcile",
                headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
            )
    finally:
        legacy_engine.update_faults(error_rate=0.0)
    assert api.status_code == page.status_code == 503, (api.text, page.text)
    assert api.json()["code"] == "legacy_unavailable"
    assert "Reconcile refused" in page.text and page.text.count("legacy_unavailable") == 1
    assert 'name="reason"' in page.text and "try now" in page.text  # the form keeps what was typed
    outcomes = [a.outcome for a in ui_kit.admin.get_operation(seeded.unknown).audit]
    assert outcomes == ["refused: LegacyTransient", "refused: LegacyTransient"]


# --- the browser ---------------------------------------------------------------------------------


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
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    service = webdriver.ChromeService(str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def click_and_load(driver: Any, element: Any) -> None:
    """Click something that submits a form or follows a link, and wait for the next page to load."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = driver.find_element(By.TAG_NAME, "html")
    element.click()

    def old_page_gone(_: Any) -> bool:
        # Chromium reports a node of an unloaded document either as stale or, at times, as a node
        # "that does not belong to the document": both mean the old page is gone.
        try:
            page.is_enabled()
        except WebDriverException:
            return True
        return False

    wait = WebDriverWait(driver, 20)
    wait.until(old_page_gone)
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


def screenshot(driver: Any, name: str, width: int = 1280) -> Path:
    """The whole page at ``width`` CSS pixels, saved under test-output/dashboard/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.set_window_size(width, 900)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(int(height) + 140, 600), 4000))
    path = SCREENSHOTS / f"{name}.png"
    assert driver.save_screenshot(str(path))
    driver.set_window_size(1280, 900)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_an_operator_logs_in_filters_opens_an_operation_and_reconciles_it(
    browser: Any, base_url: str, seeded: Seeded
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    find = browser.find_element
    browser.get(base_url + UI)
    assert browser.current_url.startswith(f"{base_url}{UI}/login")
    screenshot(browser, "login")

    find(By.ID, "token").send_keys("not-the-token-at-all")
    click_and_load(browser, find(By.ID, "login-submit"))
    assert "not valid" in find(By.ID, "login-error").text
    find(By.ID, "token").send_keys(OPERATOR_TOKEN)
    click_and_load(browser, find(By.ID, "login-submit"))

    assert browser.current_url == f"{base_url}{UI}"
    assert browser.get_cookie("adapter_admin")["httpOnly"] is True
    assert browser.get_cookie("adapter_admin")["sameSite"] == "Strict"

    def card(state: str) -> Any:
        return find(By.CSS_SELECTOR, f'[data-count="{state}"]')

    assert card("outcome_unknown").find_element(By.CLASS_NAME, "count").text == "1"
    assert card("needs_operator").find_element(By.CLASS_NAME, "count").text == "1"
    assert int(card("succeeded").find_element(By.CLASS_NAME, "count").text) >= 3
    assert "attention" in card("outcome_unknown").get_attribute("class")
    assert "attention" in card("needs_operator").get_attribute("class")
    assert find(By.ID, "total").text == str(seeded.total)
    assert find(By.ID, "lag").find_element(By.CLASS_NAME, "stat-value").text != "none"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#operations tbody tr")) == seeded.total
    screenshot(browser, "overview")
    screenshot(browser, "overview-narrow", width=420)

    Select(find(By.ID, "f-status")).select_by_value("outcome_unknown")
    click_and_load(browser, find(By.ID, "apply-filters"))
    assert "status=outcome_unknown" in browser.current_url
    [row] = browser.find_elements(By.CSS_SELECTOR, "#operations tbody tr")
    assert row.get_attribute("data-operation") == seeded.unknown
    screenshot(browser, "filtered")

    click_and_load(browser, row.find_element(By.CLASS_NAME, "op-link"))
    assert browser.current_url == f"{base_url}{UI}/operations/{seeded.unknown}"
    assert find(By.CSS_SELECTOR, "#op-status .badge").text == "outcome_unknown"
    assert find(By.ID, "audit-empty").is_displayed()
    events = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#timeline .ev-name")]
    assert "operation.recovery_point" in events
    screenshot(browser, "detail-before")

    find(By.ID, "reason-reconcile").send_keys("reply to COMMIT was lost")
    click_and_load(browser, find(By.ID, "do-reconcile"))

    assert browser.current_url == f"{base_url}{UI}/operations/{seeded.unknown}?done=reconcile"
    assert find(By.ID, "flash").text == "Reconcile: reconciled: committed"
    assert find(By.CSS_SELECTOR, "#op-status .badge").text == "succeeded"
    [entry] = browser.find_elements(By.CSS_SELECTOR, "#audit tbody tr")
    cells = [c.text for c in entry.find_elements(By.TAG_NAME, "td")]
    assert cells[1:] == ["operator", "reconcile", "reply to COMMIT was lost", "reconciled: committed"]
    assert "UTC" in cells[0]
    events = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#timeline .ev-name")]
    assert "operation.reconciled" in events
    screenshot(browser, "detail-after")
    screenshot(browser, "detail-narrow", width=420)

    browser.get(base_url + UI)
    assert card("outcome_unknown").find_element(By.CLASS_NAME, "count").text == "0"
    click_and_load(browser, find(By.CSS_SELECTOR, ".who button"))
    assert browser.current_url.startswith(f"{base_url}{UI}/login")
    assert browser.get_cookie("adapter_admin") is None
    browser.get(base_url + UI)
    assert browser.current_url.startswith(f"{base_url}{UI}/login")
