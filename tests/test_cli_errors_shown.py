"""What the client commands print when the server fails: a resource's or prompt's exception is an
opaque -32603 on the wire, shown with its correlation id and the server's stderr (where the
server logged it, with the traceback); the server's start-up line is not repeated as if it said
something about the error."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import mcpkit_command

FAILING = '''from mcpkit import Server

server = Server("failing", "1.0")


@server.resource("data://boom")
def boom() -> str:
    raise RuntimeError("disk on fire")


@server.prompt()
def bad(city: str) -> str:
    raise KeyError(city)


@server.tool(read_only=True, open_world=False)
def broken() -> str:
    raise RuntimeError("tool on fire")
'''


@pytest.fixture
def failing(tmp_path: Path) -> str:
    path = tmp_path / "failing.py"
    path.write_text(FAILING)
    return str(path)


@pytest.mark.parametrize("command, line, raised", [
    (["read", "data://boom"], 8, "RuntimeError: disk on fire"),
    (["prompt", "bad", "city=Oslo"], 13, "KeyError: 'Oslo'"),
])
def test_a_resource_or_prompt_error_is_shown_with_its_id_and_the_servers_stderr(failing, command, line, raised):
    done = subprocess.run(mcpkit_command(command[0], failing, *command[1:]), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    said = re.search(r"mcpkit: -32603: Internal error \(correlation id ([0-9a-f]{16})\)\.", done.stderr)
    assert said, done.stderr
    # the server logged it under that id, with where it came from
    assert f"(correlation id {said.group(1)})" in done.stderr.split("--- the server's stderr ---")[1]
    assert f'failing.py", line {line}' in done.stderr and raised in done.stderr
    assert "mcpkit: serving" not in done.stderr


def test_a_tool_error_shows_the_servers_stderr_without_its_startup_line(failing):
    done = subprocess.run(mcpkit_command("call", failing, "broken"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "--- the server's stderr ---" in done.stderr
    assert "RuntimeError: tool on fire" in done.stderr and "mcpkit: serving" not in done.stderr


def test_a_reader_that_goes_is_no_error_to_print(tmp_path):
    # `mcpkit list X | head -1` printed "mcpkit: [Errno 32] Broken pipe" and exit code 1
    lines = ["from mcpkit import Server", "server = Server('many', '1.0')"]
    for i in range(2000):
        lines += ["@server.tool(read_only=True, open_world=False)", f"def tool_{i}(a: int) -> int:",
                  f"    '''Tool number {i}, described at some length so that the listing is long.'''", "    return a"]
    (tmp_path / "many.py").write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(mcpkit_command("list", str(tmp_path / "many.py")), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("Tools (2000)")
    proc.stdout.close()  # as head does once it has its line
    err = proc.stderr.read()
    assert proc.wait(60) == 141, err  # as a command that SIGPIPE ended
    assert err == "", err


#: a server (no SDK) that logs about a failure just after it answers, as a buffered logger does
LOGS_AFTER = r'''
import json, sys, time

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        reply = {"result": {"protocolVersion": "2025-06-18", "serverInfo": {"name": "late", "version": "1"},
                            "capabilities": {"tools": {}, "resources": {}}}}
    elif method == "tools/list":
        reply = {"result": {"tools": [{"name": "sync", "inputSchema": {"type": "object"}}]}}
    elif method == "tools/call":
        reply = {"result": {"content": [{"type": "text", "text": "sync failed"}], "isError": True}}
    else:
        reply = {"error": {"code": -32603, "message": "Internal error"}}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], **reply}), flush=True)
    if method in ("tools/call", "resources/read"):
        time.sleep(0.3)
        print(f"ERROR {method}: the database refused the connection", file=sys.stderr, flush=True)
'''


@pytest.mark.parametrize("command", [["call", "sync"], ["read", "db://x"]])
def test_what_the_server_logs_just_after_it_answers_is_shown(tmp_path, command):
    # the stderr was read while the client was open, before its reader had what the server
    # wrote as (or just after) it answered: the line that said why was missing
    import sys

    server = tmp_path / "late.py"
    server.write_text(LOGS_AFTER)
    done = subprocess.run(mcpkit_command(command[0], f"{sys.executable} {server}", *command[1:]),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    shown = done.stderr.split("--- the server's stderr ---\n", 1)
    assert len(shown) == 2, done.stderr
    assert f"ERROR {'tools/call' if command[0] == 'call' else 'resources/read'}: the database refused" in shown[1]
