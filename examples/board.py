"""A sticky-note board whose tools show their results as an MCP App (SEP-1865).

    mcpkit serve examples/board.py            # or: python examples/board.py

Hosts that render MCP Apps (Claude, ChatGPT, VS Code...) show `show_board` as a live board
(the view in BOARD_HTML, a ui:// resource); every other host reads the same notes as text.
"""

from __future__ import annotations

from typing import Literal

from mcpkit import Server

server = Server("board", "1.0", instructions="A shared board of sticky notes.")
NOTES: list[dict[str, str]] = [{"text": "Ship the beta", "color": "yellow"}]

BOARD_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Board</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 12px; background: var(--color-background-primary, #fff); }
  #board { display: flex; flex-wrap: wrap; gap: 10px; }
  .note { width: 130px; min-height: 80px; padding: 10px; border-radius: 6px; box-shadow: 0 1px 3px #0003; }
  .yellow { background: #fff3a8; } .pink { background: #ffc9de; } .blue { background: #c8e4ff; }
  #status { color: #666; margin-bottom: 8px; }
</style></head>
<body>
<div id="status">waiting for the host...</div>
<div id="board"></div>
<script>
  // The host speaks JSON-RPC over postMessage (ext-apps 2026-01-26): ui/initialize, then it
  // sends the tool's input and result as notifications.
  let nextId = 1;
  const pending = new Map();
  function request(method, params) {
    const id = nextId++;
    window.parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
    return new Promise((resolve) => pending.set(id, resolve));
  }
  function notify(method, params) { window.parent.postMessage({ jsonrpc: "2.0", method, params }, "*"); }
  function render(result) {
    const notes = (result.structuredContent && result.structuredContent.notes) || [];
    const board = document.getElementById("board");
    board.replaceChildren(...notes.map((n) => {
      const div = document.createElement("div");
      div.className = "note " + (n.color || "yellow");
      div.textContent = n.text;
      return div;
    }));
    document.getElementById("status").textContent = notes.length + " notes";
    notify("ui/notifications/size-changed", { width: document.body.scrollWidth, height: document.body.scrollHeight });
  }
  window.addEventListener("message", (event) => {
    const msg = event.data || {};
    if (msg.id !== undefined && pending.has(msg.id)) { pending.get(msg.id)(msg.result); pending.delete(msg.id); return; }
    if (msg.method === "ui/notifications/tool-result") render(msg.params || {});
  });
  request("ui/initialize", {
    appCapabilities: { availableDisplayModes: ["inline"] },
    appInfo: { name: "board-view", version: "1.0" },
    protocolVersion: "2026-01-26",
  }).then(() => {
    document.getElementById("status").textContent = "connected";
    notify("ui/notifications/initialized", {});
  });
</script>
</body></html>
"""

server.app("ui://board/view", html=BOARD_HTML, title="Board", description="The board as sticky notes",
           prefers_border=True)


@server.tool(read_only=True, open_world=False, ui="ui://board/view")
def show_board() -> dict[str, list[dict[str, str]]]:
    """Every note on the board (shown as a board where the host renders MCP Apps)."""
    return {"notes": list(NOTES)}


@server.tool(open_world=False, destructive=False, ui="ui://board/view")
def add_note(text: str, color: Literal["yellow", "pink", "blue"] = "yellow") -> dict[str, list[dict[str, str]]]:
    """Pin a note on the board; answers with the whole board."""
    NOTES.append({"text": text, "color": color})
    return {"notes": list(NOTES)}


if __name__ == "__main__":
    server.run()
