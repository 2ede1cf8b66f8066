"""Misbehaving stdio servers for the client's tests: ``python scripted_server.py MODE``.

noise       (the default) prints lines that are not JSON-RPC on stdout (and a line on stderr), then serves the
            reference server
crash       answers initialize, then exits with code 3 (after a line on stderr) at the first request
badversion  answers initialize with a protocol version nobody supports
"""

from __future__ import annotations

import json
import sys

NOISE = ["hello from the server", "{not json", '{"json": "but not JSON-RPC"}', "[1, 2]"]


def _initialize_result(version: str) -> dict:
    info = {"name": "scripted", "version": "1"}
    return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}


def main(mode: str) -> None:
    if mode == "noise":
        for line in NOISE:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        sys.stderr.write("noisy server starting\n")
        sys.stderr.flush()
        from mcpkit.reference import server

        server.run()
        return
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("method") == "initialize":
            version = "1999-01-01" if mode == "badversion" else msg["params"]["protocolVersion"]
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": _initialize_result(version)}
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
        elif "id" in msg and mode == "crash":
            sys.stderr.write("boom: simulated crash\n")
            sys.stderr.flush()
            sys.exit(3)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "noise")
