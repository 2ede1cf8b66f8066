"""Headless Chromium for the inspector page's tests: the browser fixture, ``mcpkit dev`` started on
a free port, and small helpers. The browser comes from `tools/install-debian.sh chromium
chromium-driver` (.ci/run); without it the tests fail, they do not skip."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.conftest import component_missing, mcpkit_command

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "img"
CHROMIUM_ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1000,860")


@contextmanager
def dev_inspector(*args: str) -> Iterator[str]:
    """``mcpkit dev ARGS --port 0``; the inspector's URL."""
    proc = subprocess.Popen(mcpkit_command("dev", *args, "--port", "0"), stdin=subprocess.DEVNULL,
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
        # its stderr (audit lines under --policy) read on, so a full pipe never stops the server
        threading.Thread(target=proc.stderr.read, daemon=True).start()
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


def wait(browser: webdriver.Chrome, check, timeout: float = 20, message: str = "") -> object:
    return WebDriverWait(browser, timeout).until(lambda b: check(b), message)


def shoot(browser: webdriver.Chrome, name: str, tmp_path: Path) -> None:
    """A picture of the page; with MCPKIT_UPDATE_SCREENSHOTS=1 it replaces docs/img/dev-NAME.png."""
    path = tmp_path / f"dev-{name}.png"
    assert browser.save_screenshot(str(path))
    if os.environ.get("MCPKIT_UPDATE_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SHOTS / path.name)


def view(browser: webdriver.Chrome, name: str) -> None:
    browser.find_element(By.CSS_SELECTOR, f'#tabs button[data-view="{name}"]').click()


def text(browser: webdriver.Chrome, selector: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, selector).text


def ready(browser: webdriver.Chrome, url: str) -> None:
    browser.get(url)
    wait(browser, lambda b: b.execute_script("return document.body.dataset.ready") == "true")
