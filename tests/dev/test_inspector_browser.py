"""`mcpkit dev` in a real browser: headless Chromium (Debian's chromium and chromedriver, driven by
selenium) opens the inspector page, fills a tool's form, calls it, and reads the result, the feed,
the raw exchange, resources and prompts, and switches revision.

Each view is photographed; with MCPKIT_UPDATE_SCREENSHOTS=1 the pictures replace docs/img/dev-*.png
(shown in README.md). The browser comes from `tools/install-debian.sh chromium chromium-driver`
(.ci/run); without it this test fails, it does not skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.dev.browser import ROOT, browser, dev_inspector
from tests.dev.browser import shoot as _shoot
from tests.dev.browser import text as _text
from tests.dev.browser import view as _view
from tests.dev.browser import wait as _wait

EXAMPLE = ROOT / "examples" / "weather.py"
__all__ = ["browser"]  # the fixture, imported to be used here


@pytest.fixture(scope="module")
def inspector() -> Iterator[str]:
    """``mcpkit dev examples/weather.py`` on a free port; the inspector's URL."""
    with dev_inspector(str(EXAMPLE)) as url:
        yield url


def test_the_inspector_calls_a_tool_and_shows_every_view(inspector, browser, tmp_path):
    browser.get(inspector)
    _wait(browser, lambda b: b.execute_script("return document.body.dataset.ready") == "true")
    assert _text(browser, "#status").startswith("connected, 2025-11-25")
    assert _text(browser, "#server-name") == "weather 1.0"

    # tools: a form from the inputSchema (a string, an integer with its default, an enum)
    browser.find_element(By.CSS_SELECTOR, '#tool-list li[data-name="forecast"]').click()
    assert browser.find_element(By.ID, "arg-days").get_attribute("placeholder") == "3"
    browser.find_element(By.ID, "arg-city").send_keys("Oslo")
    browser.find_element(By.ID, "arg-days").send_keys("2")
    Select(browser.find_element(By.ID, "arg-unit")).select_by_visible_text("fahrenheit")  # the value as the user reads it, no JSON quotes
    browser.find_element(By.ID, "call-tool").click()
    verdict = _wait(browser, lambda b: b.find_elements(By.ID, "call-verdict"))[0]
    assert verdict.text.startswith("result")
    assert '"highs": [\n    40.1,\n    42.8\n  ]' in browser.find_element(By.ID, "structured").get_attribute("textContent")
    _shoot(browser, "tools", tmp_path)

    # the tool's log message and progress reached the feed
    _view(browser, "feed")
    feed = _text(browser, "#feed")
    assert "[info] forecast for Oslo, 2 day(s)" in feed and "2/2 day 2" in feed
    _shoot(browser, "feed", tmp_path)

    # every JSON-RPC message, both ways
    _view(browser, "raw")
    raw = _text(browser, "#raw")
    assert '→ {"jsonrpc":"2.0","id":' in raw and '"method":"tools/call"' in raw and '"structuredContent"' in raw
    _shoot(browser, "raw", tmp_path)

    # resources: a template's variables become a form
    _view(browser, "resources")
    browser.find_element(By.CSS_SELECTOR, '#resource-list li[data-name="weather://stations/{city}"]').click()
    browser.find_element(By.ID, "res-city").send_keys("oslo")
    browser.find_element(By.CSS_SELECTOR, "#resource-detail button.primary").click()
    _wait(browser, lambda b: "Station OSLO-01" in _text(b, "#resource-detail"))
    _shoot(browser, "resources", tmp_path)

    # prompts
    _view(browser, "prompts")
    browser.find_element(By.CSS_SELECTOR, '#prompt-list li[data-name="packing"]').click()
    # the form is built once completion said which arguments are choices
    _wait(browser, lambda b: b.find_elements(By.ID, "prompt-city"))[0].send_keys("Lima")
    browser.find_element(By.ID, "get-prompt").click()
    _wait(browser, lambda b: "for Lima over 3 days" in _text(b, "#prompt-detail"))
    _shoot(browser, "prompts", tmp_path)


def test_a_tool_error_and_a_revision_switch(inspector, browser):
    browser.get(inspector)
    _wait(browser, lambda b: b.execute_script("return document.body.dataset.ready") == "true")
    browser.find_element(By.CSS_SELECTOR, '#tool-list li[data-name="forecast"]').click()
    browser.find_element(By.ID, "arg-city").send_keys("Atlantis")
    browser.find_element(By.ID, "call-tool").click()
    verdict = _wait(browser, lambda b: b.find_elements(By.ID, "call-verdict"))[0]
    assert verdict.text.startswith("isError")
    assert "no forecast for 'Atlantis'" in _text(browser, "#tool-outcome")

    # 2026-07-28: no handshake, no session; the same call works
    Select(browser.find_element(By.ID, "revision")).select_by_value("2026-07-28")
    _wait(browser, lambda b: b.execute_script("return document.body.dataset.connected") == "2026-07-28")
    assert _text(browser, "#status") == "connected, 2026-07-28"  # no session in this revision
    browser.find_element(By.CSS_SELECTOR, '#tool-list li[data-name="forecast"]').click()
    browser.find_element(By.ID, "arg-city").send_keys("Paris")
    browser.find_element(By.ID, "call-tool").click()
    _wait(browser, lambda b: b.find_elements(By.ID, "call-verdict"))
    assert '"highs"' in _text(browser, "#tool-outcome")
    _view(browser, "raw")
    assert '"io.modelcontextprotocol/protocolVersion":"2026-07-28"' in _text(browser, "#raw")
