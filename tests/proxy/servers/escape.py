"""A raw stdio MCP server (stdlib only) whose tools try what a sandbox is there to stop: each
answers ``{"ok": bool, "detail": str}`` for one attempt.

- ``connect {host, port}``: open a TCP connection
- ``write {path}`` / ``read {path}``: write a file, read one (a file or a directory's listing)
- ``allocate {mb}``: allocate and touch that many megabytes
- ``fork {count}``: run that many processes at once
- ``spin {seconds}``: burn that much CPU time
"""

import json
import os
import socket
import sys
import time

from rawloop import serve


def connect(host, port):
    with socket.create_connection((host, port), timeout=5):
        return f"connected to {host}:{port}"


def write(path):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("written from the upstream\n")
    return f"wrote {path}"


def read(path):
    if os.path.isdir(path):
        return f"{path} lists {sorted(os.listdir(path))}"
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def allocate(mb):
    block = bytearray(mb * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])  # touched: resident, not only reserved
    return f"allocated {mb} MB"


def fork(count):
    read_end, write_end = os.pipe()
    children = []
    try:
        for _ in range(count):
            pid = os.fork()
            if pid == 0:  # every child lives until the parent closes the pipe: all at once
                os.close(write_end)
                os.read(read_end, 1)
                os._exit(0)
            children.append(pid)
        return f"ran {count} processes at once"
    except OSError as exc:
        raise OSError(f"after {len(children)} processes: {exc}") from None
    finally:
        os.close(write_end)
        os.close(read_end)
        for pid in children:
            os.waitpid(pid, 0)


def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return f"spun {seconds} s of CPU"


TOOLS = {"connect": connect, "write": write, "read": read, "allocate": allocate, "fork": fork, "spin": spin}


def send(mid, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, **result}) + "\n")
    sys.stdout.flush()


def handle(msg):
    mid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if method is None or mid is None:
        return
    if method == "initialize":
        send(mid, {"result": {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                              "serverInfo": {"name": "escape", "version": "1"}}})
    elif method == "tools/list":
        send(mid, {"result": {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]}})
    elif method == "tools/call":
        try:
            answer = {"ok": True, "detail": TOOLS[params["name"]](**params.get("arguments", {}))}
        except (OSError, MemoryError) as exc:
            answer = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
        send(mid, {"result": {"content": [{"type": "text", "text": json.dumps(answer)}]}})
    elif method == "ping":
        send(mid, {"result": {}})
    else:
        send(mid, {"error": {"code": -32601, "message": f"no {method}"}})


serve(handle)
