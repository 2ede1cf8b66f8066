"""ST-07 at EOF: a request whose dispatch (binding its arguments) outlives the hand-off of reading
to a new thread is still answered before the process exits."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SERVER = '''
import time
from dataclasses import dataclass
from mcpkit import Server

server = Server("slow-bind")

@dataclass
class Point:
    x: int

    def __post_init__(self):
        time.sleep(0.5)  # the binder builds this before the handler is called

@server.tool
def where(p: Point) -> str:
    return f"x={p.x}"

server.run()
'''


@pytest.mark.req("ST-07")
def test_a_request_still_being_dispatched_at_eof_is_answered(tmp_path):
    script = tmp_path / "slow_bind.py"
    script.write_text(SERVER)
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "where", "arguments": {"p": {"x": 3}}}},
    ]
    done = subprocess.run([sys.executable, str(script)], input="".join(json.dumps(m) + "\n" for m in lines),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
    assert answers[2]["result"]["content"] == [{"type": "text", "text": "x=3"}]
