"""Policies that explain themselves: start-up lines for hidden tools, gate switches with the
server's own names, denial hints naming the switch that applies, and add_tool's declarations."""

from __future__ import annotations

import logging
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.policy import Gates, Policy
from tests.conftest import mcpkit_command
from tests.harness import connect
from tests.policy.test_chain import LATEST_HANDSHAKE, MemoryAudit, call, error_of

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    """The README's ten-line example, as printed there."""
    text = README.read_text()
    section = text[text.index("## Ten lines"):]
    return re.search(r"```python[^\n]*\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_a_policied_server_says_at_start_up_what_it_hides_and_the_fix(wire, caplog):
    server = Server("weather", policy=Policy(gates=Gates.from_env({}), audit=MemoryAudit()))

    @server.tool(read_only=True)
    def forecast(city: str) -> str:
        return "sunny"

    files = server.manager("files")

    @files.action(read_only=True, open_world=False)
    def read(path: str) -> str:
        return ""

    @files.action(open_world=False)
    def delete(path: str) -> None: ...

    with caplog.at_level(logging.WARNING, logger="mcpkit.policy"):
        async with connect(server, wire, LATEST_HANDSHAKE) as c:
            listed = [t["name"] for t in (await c.request("tools/list", {}))["tools"]]
    lines = [r.getMessage() for r in caplog.records if r.name == "mcpkit.policy"]
    assert listed == ["files"]
    assert "forecast: hidden, open_world undeclared; declare open_world=False or set MCPKIT_ALLOW_OPEN_WORLD=1" \
        in lines
    assert "files.delete: hidden, destructive undeclared; declare destructive=False or set " \
        "MCPKIT_ALLOW_DESTRUCTIVE=1" in lines


def test_the_readme_example_served_with_policy_says_why_it_lists_no_tool(tmp_path, wire):
    script = tmp_path / "weather.py"
    script.write_text(readme_example())
    init = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n')
    done = subprocess.run(wire.command(mcpkit_command("serve", str(script), "--policy")), input=init,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("forecast: hidden, open_world undeclared; declare open_world=False or set MCPKIT_ALLOW_OPEN_WORLD=1"
            in done.stderr)
    assert "the policy hides all 1 tool(s) of 'weather'" in done.stderr


@pytest.mark.asyncio
async def test_gate_switches_keep_the_servers_own_names_and_hints_name_them(wire):
    env = {"READ_ONLY_MODE": "0", "ALLOW_DANGEROUS_OPS": "1", "GODOT_ALLOW_OPEN_WORLD": "1"}
    policy = Policy.secure(environ=env, env_prefix="GODOT_", audit=False, rate_limit=None,
                           gate_switches={"read_only": "READ_ONLY_MODE", "allow_destructive": "ALLOW_DANGEROUS_OPS"})
    assert (policy.gates.read_only, policy.gates.allow_destructive, policy.gates.allow_open_world) == (
        False, True, True)
    strict = Policy.secure(environ={"READ_ONLY_MODE": "yes"}, audit=False, rate_limit=None,
                           gate_switches={"read_only": "READ_ONLY_MODE"})
    server = Server("g", policy=strict)

    @server.tool(destructive=False, open_world=False)
    def save(text: str) -> str:
        return text

    @server.tool(destructive=True, open_world=False)
    def wipe() -> None: ...

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        saved = await call(c, "save", {"text": "x"})
    assert "read-only mode (READ_ONLY_MODE is set)" in error_of(saved)["message"]
    assert Gates.from_env({}, names={"allow_destructive": "ALLOW_DANGEROUS_OPS"}).refusal(
        {"destructiveHint": True}) == "destructive tools are disabled: set ALLOW_DANGEROUS_OPS=1 to enable them"
    in_code = Policy.secure(environ={"MCPKIT_ALLOW_DESTRUCTIVE": "1"}, allow_destructive=False, audit=False)
    assert "the server's code sets allow_destructive=False" in in_code.gates.refusal({"destructiveHint": True})
    assert "MCPKIT_ALLOW_DESTRUCTIVE" not in in_code.gates.refusal({"destructiveHint": True})
    with pytest.raises(ValueError, match="unknown gate switch"):
        Gates.from_env({}, names={"read_olny": "X"})


@pytest.mark.asyncio
async def test_add_tool_takes_the_decorators_declarations(wire):
    server = Server("raw", policy=Policy(gates=Gates(), audit=MemoryAudit()))
    calls: list[Any] = []
    tool = server.add_tool("peek", lambda args: calls.append(args) or "seen", description="Look.",
                           input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
                           read_only=True, open_world=False, idempotent=True, scopes=["files:read"],
                           timeout=5)
    server.add_tool("wipe", lambda args: "gone", input_schema={"type": "object"}, destructive=True,
                    open_world=False)
    assert tool.annotations == {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
    assert tool.scopes == ("files:read",) and tool.options.timeout == 5
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        names = [t["name"] for t in (await c.request("tools/list", {}))["tools"]]
        result = await call(c, "peek", {"x": "a"})
    assert names == ["peek"]  # wipe is destructive and the gates say no
    assert result["content"][0]["text"] == "seen" and calls == [{"x": "a"}]
