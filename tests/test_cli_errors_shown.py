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
