"""A raw stdio MCP server (2025-11-25) written before resource templates: it lists
``log://console/{count}`` among its resources, braces and all, answers no
``resources/templates/list`` (-32601), and reads any ``log://console/N``."""

import json
import sys

from rawloop import serve


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def handle(msg):
    mid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if method is None or mid is None:
        return
    if method == "initialize":
        value = {"protocolVersion": params.get("protocolVersion", "2025-11-25"), "capabilities": {"resources": {}},
                 "serverInfo": {"name": "braced", "version": "1"}}
    elif method == "resources/list":
        value = {"resources": [{"uri": "log://console/latest", "name": "latest line"},
                               {"uri": "log://console/{count}", "name": "console log", "mimeType": "text/plain"}]}
    elif method == "resources/read":
        uri = params.get("uri", "")
        value = {"contents": [{"uri": uri, "mimeType": "text/plain", "text": f"lines of {uri}"}]}
    elif method == "ping":
        value = {}
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"Method not found: {method}"}})
        return
    send({"jsonrpc": "2.0", "id": mid, "result": value})


serve(handle)
