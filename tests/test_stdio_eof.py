"""A request read just before EOF is answered even when reading moved to a new thread while its
handler was being prepared (ST-07: finish and answer what is in flight, then exit)."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from mcpkit import Server
from mcpkit.transports.stdio import StdioServer


@pytest.mark.req("ST-07")
def test_a_request_prepared_slowly_before_eof_is_still_answered():
    server = Server("slow-start")

    @server.tool
    def add(a: int, b: int) -> int:
        return a + b

    prepare = server._methods["tools/call"]

    def slow_prepare(session, ev):  # e.g. a first call compiling its validator on a busy machine
        time.sleep(0.3)
        return prepare(session, ev)

    server._methods["tools/call"] = slow_prepare
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
    ]
    os.write(in_write, "".join(json.dumps(m) + "\n" for m in lines).encode())
    os.close(in_write)  # EOF right behind the call
    stdio = StdioServer(server, in_fd=in_read, out_fd=out_write, handoff_after=0.02)
    thread = threading.Thread(target=stdio.serve)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    os.close(out_write)
    with os.fdopen(out_read, "rb") as out:
        answers = {m["id"]: m for m in map(json.loads, out.read().splitlines())}
    os.close(in_read)
    assert answers[2]["result"]["structuredContent"] == {"result": 3}
