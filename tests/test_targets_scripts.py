"""A TARGET that is a path to a script or program (not a ``.py`` file) runs as itself in every
command: a venv's console script with its venv's Python (whose modules mcpkit's own Python does
not have), a Node package's ``bin`` script with node. Each was run with mcpkit's Python before,
and died with ModuleNotFoundError or SyntaxError."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from mcpkit.targets import resolve
from tests.conftest import component_missing, mcpkit_command

#: a stdio MCP server in the standard library only, as a module of the venv (not of mcpkit's Python)
PY_SERVER = r'''
import json, sys

def main():
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        method, params = msg.get("method"), msg.get("params") or {}
        if method == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "script-echo", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object",
                      "properties": {"text": {"type": "string"}}, "required": ["text"]}}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "echo: " + params["arguments"]["text"]}]}
        elif method == "ping":
            result = {}
        else:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no " + method}}
            print(json.dumps(reply), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''

#: the same server in JavaScript, as the bin script of a Node package
JS_SERVER = r'''#!/usr/bin/env node
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (line) => {
  const msg = JSON.parse(line);
  if (!("id" in msg)) return;
  const p = msg.params || {};
  let result;
  if (msg.method === "initialize") {
    result = { protocolVersion: "2025-06-18", capabilities: { tools: {} },
               serverInfo: { name: "script-echo", version: "1" } };
  } else if (msg.method === "tools/list") {
    result = { tools: [{ name: "echo", inputSchema: { type: "object",
               properties: { text: { type: "string" } }, required: ["text"] } }] };
  } else if (msg.method === "tools/call") {
    result = { content: [{ type: "text", text: "echo: " + p.arguments.text }] };
  } else if (msg.method === "ping") {
    result = {};
  } else {
    return send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "no " + msg.method } });
  }
  send({ jsonrpc: "2.0", id: msg.id, result });
});
rl.on("close", () => process.exit(0));
'''


def _venv_script(root: Path) -> Path:
    """bin/script-echo of a fresh venv, as pip writes a console script: its #! names the venv's
    Python, and the module it imports is in the venv's site-packages only."""
    venv.create(root, with_pip=False, symlinks=True)
    site = next(root.glob("lib/python*/site-packages"))
    (site / "script_echo_server.py").write_text(PY_SERVER)
    script = root / "bin" / "script-echo"
    script.write_text(f"#!{root / 'bin' / 'python'}\nimport sys\nfrom script_echo_server import main\n"
                      "sys.exit(main())\n")
    script.chmod(0o755)
    return script


def _node_script(root: Path, executable: bool) -> Path:
    """A Node package's bin script: dist/index.js with a ``#!/usr/bin/env node`` line (npm makes
    it executable; a checkout may not)."""
    if shutil.which("node") is None:
        component_missing("node is not installed (apt-get install nodejs); the Node script target needs it")
    script = root / "pkg" / "dist" / "index.js"
    script.parent.mkdir(parents=True)
    script.write_text(JS_SERVER)
    script.chmod(0o755 if executable else 0o644)
    return script


@pytest.fixture(params=["venv-console-script", "node-bin-script", "node-script-not-executable"])
def script(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "venv-console-script":
        return _venv_script(tmp_path / "venv")
    return _node_script(tmp_path, executable=request.param == "node-bin-script")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    return subprocess.run(mcpkit_command(*args), capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)


def test_a_script_path_resolves_to_a_command_that_runs_it_as_itself(script: Path) -> None:
    target = resolve(str(script))
    assert target.kind == "command"
    argv = target.command()
    assert argv[-1] == str(script) and sys.executable not in argv
    assert target.loadable() is None and not target.runs_own_code()  # another's program: the allow-list


def test_list_and_call_run_the_script_as_itself(script: Path) -> None:
    listed = run("list", str(script), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)["tools"]] == ["echo"]
    called = run("call", str(script), "echo", "text=hi")
    assert called.returncode == 0, called.stderr
    assert "echo: hi" in called.stdout


@pytest.mark.parametrize("dashes", [False, True])
def test_check_runs_the_script_as_itself_with_or_without_dashes(script: Path, dashes: bool) -> None:
    args = ["check", "--quick", "--json", *(["--"] if dashes else []), str(script)]
    done = run(*args)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["error"] is None
    assert report["negotiated"] == {"2025-11-25": "2025-06-18"}  # the script answered its handshake


@pytest.mark.parametrize("dashes", [False, True])
@pytest.mark.asyncio
async def test_the_proxy_runs_the_script_as_itself(script: Path, dashes: bool) -> None:
    # `mcpkit proxy PATH` split the path as a command line and ran it as a program: a script
    # that is not executable failed, where `mcpkit list PATH` ran it
    from mcpkit.client import Client

    async with Client(mcpkit_command("proxy", *(["--"] if dashes else []), str(script))) as client:
        assert [t["name"] for t in await client.list_tools()] == ["echo"]
        result = await client.call_tool("echo", {"text": "hi"})
        assert result["content"][0]["text"] == "echo: hi"
