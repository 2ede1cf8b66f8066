"""A raw stdio MCP server (2025-11-25) written before resource templates: it lists
``log://console/{count}`` among its resources, braces and all, answers no
``resources/templates/list`` (-32601), and reads any ``log://console/N``."""

from rawloop import send, serve

RESOURCES = [{"uri": "log://console/latest", "name": "latest line"},
             {"uri": "log://console/{count}", "name": "console log", "mimeType": "text/plain"}]
ANSWERS = {
    "initialize": lambda p: {"protocolVersion": p.get("protocolVersion", "2025-11-25"),
                             "capabilities": {"resources": {}}, "serverInfo": {"name": "braced", "version": "1"}},
    "resources/list": lambda p: {"resources": RESOURCES},
    "resources/read": lambda p: {"contents": [{"uri": p.get("uri", ""), "mimeType": "text/plain",
                                               "text": f"lines of {p.get('uri', '')}"}]},
    "ping": lambda p: {},
}


def handle(msg):
    if msg.get("id") is None or msg.get("method") is None:
        return  # a notification
    answer = ANSWERS.get(msg["method"])
    if answer is None:
        error = {"code": -32601, "message": f"Method not found: {msg['method']}"}
        send({"jsonrpc": "2.0", "id": msg["id"], "error": error})
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg.get("params") or {})})


serve(handle)
