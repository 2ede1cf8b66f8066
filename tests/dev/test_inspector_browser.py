"""`mcpkit dev` in a real browser: headless Chromium (Debian's chromium and chromedriver, driven by
selenium) opens the inspector page, fills a tool's form, calls it, and reads the result, the feed,
the raw exchange, resources and prompts, and switches revision.

Each view is photographed; with MCPKIT_UPDATE_SCREENSHOTS=1 the pictures replace docs/img/dev-*.png
(shown in README.md). The browser comes from `tools/install-debian.sh chromium chromium-driver`
(.ci/run); without it this test fails, it does not skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import component_missing
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.conftest import mcpkit_command

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "weather.py"
SHOTS = ROOT / "docs" / "img"
CHROMIUM_ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1000,860")


@pytest.fixture(scope="module")
def inspector() -> Iterator[str]:
    """``mcpkit dev examples/weather.py`` on a free port; the inspector's URL."""
    proc = subprocess.Popen(mcpkit_command("dev", str(EXAMPLE), "--port", "0"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for _ in range(10):
            line = proc.stderr.readline()
            found = re.search(r"inspector at (http://127\.0\.0\.1:\d+/)", line)
            if found:
                url = found.group(1)
                break
        assert url, "mcpkit dev did not say where the inspector is"
        yield url
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        component_missing("chromium and chromedriver are needed: bash tools/install-debian.sh chromium chromium-driver")
    options = Options()
    options.binary_location = chromium
    for arg in CHROMIUM_ARGS:
        options.add_argument(arg)
    browser = webdriver.Chrome(options=options, service=Service(driver))
    try:
        yield browser
    finally:
        browser.quit()


def _wait(browser: webdriver.Chrome, check, timeout: float = 20) -> object:
    return WebDriverWait(browser, timeout).until(lambda b: check(b))


def _shoot(browser: webdriver.Chrome, name: str, tmp_path: Path) -> None:
    path = tmp_path / f"dev-{name}.png"
    assert browser.save_screenshot(str(path))
    if os.environ.get("MCPKIT_UPDATE_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SHOTS / path.name)


def _view(browser: webdriver.Chrome, name: str) -> None:
    browser.find_element(By.CSS_SELECTOR, f'#tabs button[data-view="{name}"]').click()


def _text(browser: webdriver.Chrome, selector: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, selector).text


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
    Select(browser.find_element(By.ID, "arg-unit")).select_by_visible_text('"fahrenheit"')
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
    browser.find_element(By.ID, "prompt-city").send_keys("Lima")
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
