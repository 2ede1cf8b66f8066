"""The inspector page in headless Chromium attached to servers it does not load: the Node
``server-everything`` (tools/install-mcp-servers.sh) and a URL; and under ``--reload``, an edit's
new tool shown without a user action, a syntax error shown on the page and cleared by the fix.
Chromium and the Node servers are installed by .ci/run; without them these tests fail in CI."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.conftest import component_missing
from tests.dev.test_dev_attach import Running
from tests.dev.test_inspector_browser import EXAMPLE, _text, _wait, browser  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]
INSTALLER = ROOT / "tools" / "install-mcp-servers.sh"


@pytest.fixture(scope="module")
def everything() -> str:
    """The path of server-everything's command."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        component_missing("node and npm are needed for server-everything (on Debian: apt-get install nodejs npm)")
    done = subprocess.run(["bash", str(INSTALLER)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not done.stdout.strip():
        component_missing(f"tools/install-mcp-servers.sh failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return str(Path(done.stdout.strip().splitlines()[-1]) / "node_modules" / ".bin" / "mcp-server-everything")


@pytest.fixture
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for one in started:
        one.stop()


def _dev(running: list[Running], *args: str) -> tuple[Running, str]:
    dev = Running("dev", *args, "--port", "0")
    running.append(dev)
    return dev, dev.until(r"inspector at (http://127\.0\.0\.1:\d+/)").group(1)


def _open(browser, url: str) -> None:  # noqa: F811 - the fixture's value
    browser.get(url)
    _wait(browser, lambda b: b.execute_script("return document.body.dataset.ready") == "true", 60)


def test_the_page_attached_to_a_node_stdio_server(everything, browser, running):  # noqa: F811
    dev, url = _dev(running, everything)
    _open(browser, url)
    assert _text(browser, "#status").startswith("connected, 2025-11-25")
    assert _text(browser, "#attached") == f"attached to {everything}"
    browser.find_element(By.CSS_SELECTOR, '#tool-list li[data-name="echo"]').click()
    browser.find_element(By.ID, "arg-message").send_keys("hello from the page")
    browser.find_element(By.ID, "call-tool").click()
    verdict = _wait(browser, lambda b: b.find_elements(By.ID, "call-verdict"))[0]
    assert verdict.text.startswith("result")
    assert "hello from the page" in _text(browser, "#tool-outcome")
    assert "Traceback" not in dev.stop()


def test_the_page_attached_to_a_url(browser, running):  # noqa: F811
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    served = Running("serve", str(EXAMPLE), "--http", f"127.0.0.1:{port}")
    running.append(served)
    served.until("serving weather")
    dev, url = _dev(running, f"http://127.0.0.1:{port}/mcp")
    _open(browser, url)
    assert _text(browser, "#server-name") == "weather 1.0"
    browser.find_element(By.CSS_SELECTOR, '#tool-list li[data-name="forecast"]').click()
    browser.find_element(By.ID, "arg-city").send_keys("Oslo")
    browser.find_element(By.ID, "call-tool").click()
    _wait(browser, lambda b: b.find_elements(By.ID, "call-verdict"))
    assert '"highs"' in _text(browser, "#tool-outcome")
    assert "Traceback" not in dev.stop()


LIVE = '''from mcpkit import Server

server = Server("live", "1.0")


@server.tool(read_only=True, open_world=False)
def first() -> str:
    return "one"
'''

SECOND = '''

@server.tool(read_only=True, open_world=False)
def second() -> str:
    return "two"
'''


def test_after_an_edit_the_page_shows_the_new_tool_and_a_load_error_until_fixed(browser, running, tmp_path):  # noqa: F811
    live = tmp_path / "live.py"
    live.write_text(LIVE)
    dev, url = _dev(running, str(live), "--reload")
    _open(browser, url)
    tools = lambda b: [li.get_attribute("data-name") for li in b.find_elements(By.CSS_SELECTOR, "#tool-list li[data-name]")]  # noqa: E731
    assert tools(browser) == ["first"]
    assert not browser.find_element(By.ID, "load-error").is_displayed()

    live.write_text(LIVE + SECOND)  # no click, no reload of the page: it is told
    _wait(browser, lambda b: tools(b) == ["first", "second"], 60)

    live.write_text(LIVE + SECOND + "\ndef broken(:\n    pass\n")
    banner = _wait(browser, lambda b: b.find_element(By.ID, "load-error").is_displayed()
                   and b.find_element(By.ID, "load-error"), 60)
    assert re.search(r"live\.py:15: SyntaxError: invalid syntax", banner.text), banner.text
    assert "did not load" in _text(browser, "#status")

    live.write_text(LIVE)
    _wait(browser, lambda b: not b.find_element(By.ID, "load-error").is_displayed() and tools(b) == ["first"], 60)
    _wait(browser, lambda b: _text(b, "#status").startswith("connected"), 30)
    said = dev.stop()
    assert said.count("changed; restarting the server") == 3, said
    assert "Traceback" not in said and "CancelledError" not in said, said
