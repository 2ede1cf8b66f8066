"""MCP Apps (SEP-1865, ext-apps 2026-01-26): views as ui:// resources, tools linked to them, the
extension in the capabilities, and the board example's view rendering a real tool result in a
real browser, inside the iframe a host would give it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, Server
from mcpkit.server.apps import APP_MIME_TYPE, UI_EXTENSION, client_supports_apps
from tests.apps.browser import chromium

ROOT = Path(__file__).resolve().parents[2]


def load_board() -> Any:
    spec = importlib.util.spec_from_file_location("board_example", ROOT / "examples" / "board.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_a_view_is_a_ui_resource_with_its_meta_in_the_listing_and_the_contents():
    server = Server("s")
    server.app("ui://s/view", html="<!DOCTYPE html><p>hi</p>", connect_domains=["https://api.example.com"],
               permissions=["clipboard_write"], prefers_border=False)

    async def run() -> tuple[Any, Any]:
        async with Client(server) as client:
            return await client.list_resources(), await client.read_resource("ui://s/view")

    listed, read = asyncio.run(run())
    ui = {"csp": {"connectDomains": ["https://api.example.com"]}, "permissions": {"clipboardWrite": {}},
          "prefersBorder": False}
    assert listed == [{"uri": "ui://s/view", "name": "s/view", "mimeType": APP_MIME_TYPE, "_meta": {"ui": ui}}]
    assert read["contents"] == [{"uri": "ui://s/view", "mimeType": APP_MIME_TYPE,
                                 "text": "<!DOCTYPE html><p>hi</p>", "_meta": {"ui": ui}}]


def test_a_linked_tool_names_its_view_and_the_extension_is_declared_only_with_apps():
    plain = Server("plain")
    assert "extensions" not in plain.capabilities(_rev("2025-11-25"))
    board = load_board().server
    for rev in ("2024-11-05", "2025-06-18", "2025-11-25"):
        assert board.capabilities(_rev(rev))["extensions"] == {UI_EXTENSION: {}}
    modern = board.capabilities(_rev("2026-07-28"))["extensions"]
    assert UI_EXTENSION in modern and len(modern) == 2  # beside the tasks extension

    async def run() -> Any:
        async with Client(board) as client:
            return await client.list_tools()

    tools = {t["name"]: t for t in asyncio.run(run())}
    assert tools["show_board"]["_meta"] == {"ui": {"resourceUri": "ui://board/view"}}


def test_app_only_tools_and_bad_declarations():
    server = Server("s")

    @server.tool(ui="ui://s/view", ui_visibility=["app"])
    def refresh() -> str:
        return "ok"

    assert server.tools["refresh"].meta == {"ui": {"resourceUri": "ui://s/view", "visibility": ["app"]}}
    with pytest.raises(ValueError, match="ui://"):
        server.app("https://example.com/view", html="<p>")
    with pytest.raises(ValueError, match="ui://"):
        server.tool(ui="board/view")(lambda: None)
    with pytest.raises(ValueError, match="visibility"):
        server.tool(ui="ui://s/view", ui_visibility=["everyone"])(lambda: None)
    with pytest.raises(ValueError, match="permission"):
        server.app("ui://s/other", html="<p>", permissions=["telepathy"])


def test_a_linked_tool_keeps_its_text_for_hosts_without_apps():
    board = load_board().server

    async def run() -> Any:
        async with Client(board) as client:
            return await client.call_tool("show_board", {})

    result = asyncio.run(run())
    text = result["content"][0]["text"]
    assert result["content"][0]["type"] == "text" and "Ship the beta" in text
    assert json.loads(text) == result["structuredContent"]


def test_client_supports_apps_reads_the_declared_extension():
    class Ctx:
        def __init__(self, caps: Any) -> None:
            self.client_capabilities = caps

    assert client_supports_apps(Ctx({"extensions": {UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}}))
    assert not client_supports_apps(Ctx({"extensions": {UI_EXTENSION: {"mimeTypes": ["text/plain"]}}}))
    assert not client_supports_apps(Ctx({}))
    assert not client_supports_apps(Ctx(None))


HOST_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>host</title></head>
<body style="margin:0">
<iframe id="view" sandbox="allow-scripts" style="border:1px solid #ccc;width:640px;height:360px"></iframe>
<pre id="log"></pre>
<script>
  // What a host does (ext-apps 2026-01-26 "Lifecycle"): render the view, answer ui/initialize,
  // and once the view says it is initialized, send the tool's input and result.
  const TOOL_INPUT = __INPUT__;
  const TOOL_RESULT = __RESULT__;
  const frame = document.getElementById("view");
  const seen = [];
  window.addEventListener("message", (event) => {
    const msg = event.data || {};
    seen.push(msg.method || ("response " + msg.id));
    document.getElementById("log").textContent = JSON.stringify(seen);
    if (msg.method === "ui/initialize") {
      frame.contentWindow.postMessage({ jsonrpc: "2.0", id: msg.id, result: {
        protocolVersion: "2026-01-26", hostInfo: { name: "test-host", version: "1" },
        hostCapabilities: {}, hostContext: { theme: "light", displayMode: "inline" } } }, "*");
    } else if (msg.method === "ui/notifications/initialized") {
      frame.contentWindow.postMessage({ jsonrpc: "2.0", method: "ui/notifications/tool-input",
                                        params: { arguments: TOOL_INPUT } }, "*");
      frame.contentWindow.postMessage({ jsonrpc: "2.0", method: "ui/notifications/tool-result",
                                        params: TOOL_RESULT }, "*");
    }
  });
  frame.srcdoc = __HTML__;
</script>
</body></html>
"""


def test_the_board_view_renders_a_real_tool_result_in_chromium(tmp_path):
    board = load_board().server

    async def run() -> tuple[str, Any]:
        async with Client(board) as client:
            view = await client.read_resource("ui://board/view")
            result = await client.call_tool("add_note", {"text": "Draw the logo", "color": "pink"})
            return view["contents"][0]["text"], result

    html, result = asyncio.run(run())
    def js(value: Any) -> str:  # JSON inside a <script>: "</script>" in a string would end it
        return json.dumps(value).replace("</", "<\\/")

    page = (HOST_PAGE.replace("__INPUT__", js({"text": "Draw the logo", "color": "pink"}))
            .replace("__RESULT__", js(result)).replace("__HTML__", js(html)))
    host = tmp_path / "host.html"
    host.write_text(page)
    with chromium() as driver:
        driver.get(host.as_uri())
        from selenium.common.exceptions import NoSuchElementException
        from selenium.webdriver.common.by import By

        deadline = time.monotonic() + 20
        notes: list[str] = []
        status = ""
        while time.monotonic() < deadline:
            driver.switch_to.default_content()
            driver.switch_to.frame(driver.find_element(By.ID, "view"))
            try:
                notes = [n.text for n in driver.find_elements(By.CSS_SELECTOR, ".note")]
                status = driver.find_element(By.ID, "status").text
            except NoSuchElementException:  # the view's document is not loaded yet
                pass
            if notes:
                break
            time.sleep(0.1)
        assert notes == [n["text"] for n in result["structuredContent"]["notes"]]
        assert "Draw the logo" in notes and status == f"{len(notes)} notes"
        assert driver.find_elements(By.CSS_SELECTOR, ".note.pink")[-1].text == "Draw the logo"
        driver.switch_to.default_content()
        log = json.loads(driver.find_element(By.ID, "log").text)
        assert log[:2] == ["ui/initialize", "ui/notifications/initialized"]
        assert "ui/notifications/size-changed" in log
        # docs/img/mcp-app-board.png is this screenshot
        assert driver.save_screenshot(str(tmp_path / "mcp-app-board.png"))


def _rev(version: str) -> Any:
    from mcpkit.protocol.revisions import get

    return get(version)
