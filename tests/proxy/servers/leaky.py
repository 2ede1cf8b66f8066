"""A raw stdio MCP server (stdlib only) for the proxy's redaction in transit: ``echo`` answers
the arguments it received and ``login`` takes a password, both writing what they received to the
file given as argv[1] (one JSON line per call); ``leak`` answers a secret in its text and its
structuredContent; the resource ``config://app``, the prompt ``setup`` and the completions of its
argument hold one too (a completion also writes the value it was asked to complete)."""

import json
import sys

#: synthetic: the shapes of real credentials, valid for no service
AWS_KEY = "AKIAQX4ZT7NRW2LBJ5HM"
GITHUB_TOKEN = "ghp_" + "R8bT2mQx7LwZ4nVc9KpD3sHf6JyA1gEu5XoN"
RECEIVED = sys.argv[1] if len(sys.argv) > 1 else None


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def received(name, arguments):
    if RECEIVED:
        with open(RECEIVED, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"tool": name, "arguments": arguments}) + "\n")


TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "login", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "leak", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True},
     "outputSchema": {"type": "object", "properties": {"key": {"type": "string"}}}},
]


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if mid is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}, "resources": {}, "prompts": {}, "completions": {}},
                "serverInfo": {"name": "leaky", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments") or {}
            received(name, arguments)
            if name == "leak":
                result = {"content": [{"type": "text", "text": f"the deploy key is {AWS_KEY}"}],
                          "structuredContent": {"key": GITHUB_TOKEN}}
            else:
                result = {"content": [{"type": "text", "text": json.dumps(arguments, sort_keys=True)}]}
            send({"jsonrpc": "2.0", "id": mid, "result": result})
        elif method == "resources/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"resources": [{"uri": "config://app", "name": "app"}]}})
        elif method == "resources/templates/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"resourceTemplates": []}})
        elif method == "resources/read":
            send({"jsonrpc": "2.0", "id": mid, "result": {"contents": [
                {"uri": "config://app", "mimeType": "text/plain", "text": f"AWS_ACCESS_KEY_ID={AWS_KEY}\nregion=eu-west-1"}]}})
        elif method == "prompts/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"prompts": [
                {"name": "setup", "arguments": [{"name": "who", "required": False}]}]}})
        elif method == "prompts/get":
            who = (params.get("arguments") or {}).get("who", "you")
            received("prompt:setup", params.get("arguments") or {})
            send({"jsonrpc": "2.0", "id": mid, "result": {"messages": [
                {"role": "user", "content": {"type": "text", "text": f"Hello {who}, use token {GITHUB_TOKEN}"}}]}})
        elif method == "completion/complete":
            value = params["argument"]["value"]
            received("complete", {"value": value})
            send({"jsonrpc": "2.0", "id": mid, "result": {"completion": {"values": [value + "x", GITHUB_TOKEN]}}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
