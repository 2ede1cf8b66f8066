"""The developer's loop on the command line: one TARGET everywhere, a server that says where it
is, `mcpkit call` as users expect, read/prompt/install, and no tracebacks for user mistakes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpkit.targets import TargetError, resolve
from tests.conftest import mcpkit_command

WEATHER = '''
from mcpkit import Server, Context

server = Server("weather", "1.0")

@server.tool(read_only=True, open_world=False)
def forecast(city: str, days: int = 3) -> dict:
    """Daily high temperatures for a city."""
    return {"city": city, "days": days}

@server.tool
async def slow(ctx: Context) -> str:
    """Reports progress and logs."""
    await ctx.info("starting the slow work")
    for step in (1, 2):
        await ctx.report_progress(step, 2, f"step {step}")
    return "done"

@server.tool
def crash() -> str:
    import sys
    print("the disk is on fire", file=sys.stderr)
    raise RuntimeError("boom")

@server.resource("notes://today", mime_type="text/plain")
def today() -> str:
    return "buy milk"

@server.prompt
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello {name}"

if __name__ == "__main__":
    server.run()
'''


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpkit_command(*args), capture_output=True, text=True, timeout=120, cwd=cwd,
                          env=env, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)


@pytest.fixture
def weather(tmp_path: Path) -> Path:
    path = tmp_path / "weather.py"
    path.write_text(WEATHER)
    return path


# ------------------------------------------------------------------------------------------ TARGET


def test_every_form_of_target_is_read_the_same_way(weather, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve("weather.py").kind == "file"
    assert resolve("weather.py:server").attribute == "server"
    assert resolve("weather:server").kind == "module"
    assert resolve(f"{sys.executable} weather.py").kind == "command"
    assert resolve("http://127.0.0.1:8000/mcp").kind == "url"
    assert resolve("").kind == "reference"
    # a command line that runs an mcpkit file can still be loaded in-process (docs, dev, serve)
    assert resolve(f"{sys.executable} weather.py").loadable().location == str(weather)
    assert resolve(f"{sys.executable} -m mcpkit serve weather.py").loadable().kind == "file"
    assert resolve("node build/index.js").loadable() is None
    # a server's executable given by its path runs as itself (it was handed to Python)
    executable = tmp_path / "mcp-server-x"
    executable.write_text("#!/usr/bin/env node\nconsole.log('x')\n")
    executable.chmod(0o755)
    assert (resolve(str(executable)).kind, resolve(str(executable)).command()) == ("command", [str(executable)])
    with pytest.raises(TargetError, match="no such file"):
        resolve("missing.py")
    with pytest.raises(TargetError, match="importable module"):
        resolve("no_such_module_anywhere")


@pytest.mark.parametrize("form", ["file", "command", "module"])
def test_list_docs_call_read_and_prompt_accept_every_form(weather, form):
    target = {"file": str(weather), "command": f"{sys.executable} {weather}", "module": "weather:server"}[form]
    cwd = weather.parent
    listed = run("list", target, cwd=cwd)
    assert listed.returncode == 0, listed.stderr
    assert "forecast" in listed.stdout and "notes://today" in listed.stdout and "greet" in listed.stdout
    docs = run("docs", target, cwd=cwd)
    assert docs.returncode == 0 and "### `forecast`" in docs.stdout
    called = run("call", target, "forecast", "city=Oslo", cwd=cwd)
    assert called.returncode == 0 and json.loads(called.stdout)["city"] == "Oslo"
    read = run("read", target, "notes://today", cwd=cwd)
    assert read.returncode == 0 and read.stdout == "buy milk\n"
    prompt = run("prompt", target, "greet", "name=Ada", cwd=cwd)
    assert prompt.returncode == 0 and "Hello Ada" in prompt.stdout


def test_check_and_doctor_accept_a_file(weather):
    doctor = run("doctor", str(weather))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "answered initialize" in doctor.stdout
    check = run("check", str(weather), "--json", "--revision", "2025-11-25")
    assert check.returncode in (0, 1), check.stderr
    assert json.loads(check.stdout)["target"].endswith(f"mcpkit serve {weather}")


# ------------------------------------------------------------------------------------------ call


def test_call_reads_values_by_the_tools_schema(weather):
    # a string field keeps "2024" a string; an integer field takes the number
    done = run("call", str(weather), "forecast", "city=2024", "days=2")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"city": "2024", "days": 2}


def test_call_takes_a_json_object_from_the_option_or_stdin(weather):
    done = run("call", str(weather), "forecast", "--json", '{"city": "Paris", "days": 1}')
    assert json.loads(done.stdout) == {"city": "Paris", "days": 1}
    piped = run("call", str(weather), "forecast", "--json", "-", stdin='{"city": "Rome"}')
    assert json.loads(piped.stdout) == {"city": "Rome", "days": 3}
    bad = run("call", str(weather), "forecast", "--json", "[1]")
    assert bad.returncode == 2 and "JSON object" in bad.stderr and "Traceback" not in bad.stderr


def test_call_shows_progress_and_logs_on_stderr_and_the_result_on_stdout(weather):
    done = run("call", str(weather), "slow")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    assert "progress 1/2 step 1" in done.stderr and "progress 2/2 step 2" in done.stderr
    assert "starting the slow work" in done.stderr


def test_a_crashing_tool_shows_the_servers_stderr(weather):
    done = run("call", str(weather), "crash")
    assert done.returncode == 1 and done.stdout == ""
    assert "the disk is on fire" in done.stderr and "server's stderr" in done.stderr


# ------------------------------------------------------------------------------------------ install


def test_install_writes_each_clients_form_for_a_url():
    url = "https://mcp.example.com/mcp"
    expected = {
        "claude-code": {"mcpServers": {"mcp": {"type": "http", "url": url}}},
        "cursor": {"mcpServers": {"mcp": {"url": url}}},
        "vscode": {"servers": {"mcp": {"type": "http", "url": url}}},
        # Claude Desktop's file takes commands only: the mcp-remote stdio bridge
        "claude-desktop": {"mcpServers": {"mcp": {"command": "npx", "args": ["-y", "mcp-remote", url]}}},
    }
    for client, entry in expected.items():
        done = run("install", client, url)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.split("\n# or:")[0]) == entry, client


def test_install_writes_a_non_mcpkit_server_as_its_own_command(tmp_path):
    sdk_server = tmp_path / "sdk_server.py"
    sdk_server.write_text("from mcp.server.fastmcp import FastMCP\nmcp = FastMCP('x')\nmcp.run()\n")
    done = run("install", "claude-desktop", str(sdk_server))
    entry = json.loads(done.stdout)["mcpServers"]["sdk_server"]
    assert entry == {"command": sys.executable, "args": [str(sdk_server)]}
    node = run("config", "cursor", "node build/index.js --stdio", "--name", "ts")
    entry = json.loads(node.stdout)["mcpServers"]["ts"]
    assert entry["args"] == ["build/index.js", "--stdio"] and entry["command"].endswith("node")
    assert "mcpkit" not in json.dumps(entry)


def test_install_for_vscode_writes_the_workspace_file(weather, tmp_path):
    done = run("install", "vscode", str(weather), "--write", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / ".vscode" / "mcp.json").read_text())
    assert config == {"servers": {"weather": {"type": "stdio", "command": sys.executable,
                                              "args": ["-m", "mcpkit", "serve", str(weather)]}}}


# ------------------------------------------------------------------------------------------ serve


def test_version():
    done = run("--version")
    assert done.returncode == 0 and done.stdout.startswith("mcpkit 0.")


def test_stdio_serve_says_what_it_serves_on_stderr_only(weather):
    done = subprocess.run(mcpkit_command("serve", str(weather)), capture_output=True, text=True, timeout=60,
                          input="")
    assert done.returncode == 0 and done.stdout == ""
    line = done.stderr.splitlines()[0]
    assert line.startswith("mcpkit: serving weather 1.0 on stdio")
    assert "2025-11-25" in line and "3 tools, 1 resource, 1 prompt" in line and "policy off" in line
    quiet = subprocess.run(mcpkit_command("serve", str(weather), "--log-level", "error"), capture_output=True,
                           text=True, timeout=60, input="")
    assert "serving" not in quiet.stderr


def test_a_warning_logged_while_the_server_file_is_imported_has_the_log_format(tmp_path):
    # it went to logging.lastResort, which printed the bare message ("bridge editor cannot connect:
    # ..." with no "WARNING mcpkit.bridge:") because serve sets the format only when it starts serving
    server = tmp_path / "keys.py"
    server.write_text("import logging\nfrom mcpkit import Server\nlogging.getLogger('keys').warning('no API key')\n"
                      "server = Server('keys')\n")
    done = subprocess.run(mcpkit_command("serve", str(server)), capture_output=True, text=True, timeout=60,
                          input="", check=False)
    assert done.returncode == 0 and done.stdout == ""
    assert "WARNING keys: no API key" in done.stderr.splitlines(), done.stderr
    # a module that configures logging itself still has it its own way
    server.write_text("import logging\nfrom mcpkit import Server\nlogging.basicConfig(format='own %(message)s')\n"
                      "logging.getLogger('keys').warning('no API key')\nserver = Server('keys')\n")
    done = subprocess.run(mcpkit_command("serve", str(server)), capture_output=True, text=True, timeout=60,
                          input="", check=False)
    assert "own no API key" in done.stderr.splitlines(), done.stderr


def test_the_start_up_line_is_one_write(monkeypatch):
    # print() wrote the line and its newline apart, and another thread's warning landed between
    # them: "... contract envelopesbridge editor cannot connect: ..."
    import argparse

    from mcpkit import cli_serving

    class Recorder:
        def __init__(self) -> None:
            self.writes: list[str] = []

        def write(self, text: str) -> int:
            self.writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    recorder = Recorder()
    monkeypatch.setattr(sys, "stderr", recorder)
    cli_serving.announce_line("mcpkit: serving x 1.0 on stdio", argparse.Namespace())
    assert recorder.writes == ["mcpkit: serving x 1.0 on stdio\n"]


def test_stdio_serve_on_a_terminal_says_it_waits_and_how_to_try_it(weather):
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(mcpkit_command("serve", str(weather)), stdin=follower, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    os.close(follower)
    try:
        deadline = time.monotonic() + 30
        seen = ""
        while "mcpkit dev" not in seen and time.monotonic() < deadline:
            seen += proc.stderr.readline()
        assert "waiting for an MCP client" in seen and f"mcpkit list {weather}" in seen
    finally:
        proc.kill()
        proc.wait()
        os.close(leader)


def test_http_serve_prints_the_url_it_listens_on(weather):
    proc = subprocess.Popen(mcpkit_command("serve", str(weather), "--http", "127.0.0.1:0", "--read-only",
                                           "--policy"), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = proc.stderr.readline()
        assert line.startswith("mcpkit: serving weather 1.0 on http://127.0.0.1:")
        assert "policy: read-only" in line and "(2 gated)" in line
        url = line.split(" on ")[1].split(" ")[0]
        assert url.endswith("/mcp")
        listed = run("list", url)
        assert listed.returncode == 0 and "forecast" in listed.stdout
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_taken_port_is_one_line_with_the_fix(weather):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", str(weather), "--http", f"127.0.0.1:{port}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"mcpkit: cannot listen on 127.0.0.1:{port} (Address already in use); pick another port, e.g. "
        f"--http 127.0.0.1:{port + 1}"]


#: an address of no machine here (TEST-NET-1, RFC 5737): binding to it fails, no packet is sent
ELSEWHERE = "192.0.2.1"


@pytest.mark.parametrize("command", [
    ["serve", "--http", f"{ELSEWHERE}:8000"],
    ["serve", "--http", f"{ELSEWHERE}:8000", "--workers", "2"],  # was uvicorn's own error, exit 1
    ["proxy", "--http", f"{ELSEWHERE}:8000", "--", sys.executable, "-m", "mcpkit", "serve"],
])
def test_an_address_of_another_machine_is_one_line_naming_the_address_not_the_port(command):
    # it said "(Cannot assign requested address); pick another port, e.g. --http 8.8.8.8:8001"
    env = {k: v for k, v in os.environ.items() if k != "MCPKIT_STORE"}
    if "--workers" in command:
        env["MCPKIT_STORE"] = "redis://127.0.0.1:1"  # --workers needs one; the parent never connects to it
    done = run(*command, env=env)
    assert done.returncode == 2, done.stderr
    expected = (f"mcpkit: cannot listen on {ELSEWHERE}:8000 (Cannot assign requested address); {ELSEWHERE} is "
                "not an address of this machine; give one of its own, e.g. --http 127.0.0.1:8000 (this machine "
                "only) or --http 0.0.0.0:8000 (every interface)")
    assert done.stderr.strip().splitlines() == [expected], done.stderr


def test_dev_on_a_taken_port_names_its_own_option():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("dev", "--port", str(port))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"mcpkit: cannot listen on 127.0.0.1:{port} (Address already in use); pick another port, e.g. "
        f"--port {port + 1}"), done.stderr


@pytest.mark.parametrize("option", [["--json"], ["--stateless"], ["--cors-origin", "https://a.example"],
                                    ["--max-sessions", "3"], ["--allow-host", "x"], ["--root-path", "/api"]])
def test_http_options_on_stdio_are_refused(weather, option):
    done = run("serve", str(weather), *option)
    assert done.returncode == 2
    assert f"{option[0]} applies to HTTP only" in done.stderr and "Traceback" not in done.stderr


# ------------------------------------------------------------------------------------------ mistakes


@pytest.mark.parametrize(("setup", "args", "env", "expected"), [
    ("", ["serve", "missing.py"], {}, "mcpkit: no such file: missing.py"),
    ("", ["list", "no_such_module_here"], {}, "is no file, command on PATH or importable module"),
    ("ok", ["serve", "weather.py:nothing"], {}, "has no attribute 'nothing'"),
    ("ok", ["serve", "weather.py", "--policy"], {"MCPKIT_TOOL_TIMEOUT": "soon"}, "MCPKIT_TOOL_TIMEOUT='soon' is not"),
    ("ok", ["serve", "weather.py", "--policy"], {"MCPKIT_TOOL_TIMEOUT": "-1"}, "or 0 for no timeout"),
    ("ok", ["serve", "weather.py", "--policy"], {"MCPKIT_TOOL_TIMEOUT": "nan"}, "give a positive number"),
    ("ok", ["serve", "weather.py", "--policy"], {"MCPKIT_READ_ONLY": "maybe"}, "MCPKIT_READ_ONLY"),
    # only "1" was read, anything else silently left it off
    ("ok", ["serve", "weather.py"], {"MCPKIT_OTEL": "maybe"}, "MCPKIT_OTEL='maybe' is not a boolean"),
    ("tokens", ["serve", "weather.py", "--http", "127.0.0.1:0", "--auth", "tokens:tokens.txt"], {}, "tokens.txt"),
    ("ok", ["call", "weather.py", "forecast", "city"], {}, "arguments are key=value"),
    ("ok", ["serve", "weather.py", "--policy", "--root", "no-such-dir"], {}, "sandbox root"),
])
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, setup, args, env, expected):
    if setup:
        (tmp_path / "weather.py").write_text(WEATHER)
    if setup == "tokens":
        tokens = tmp_path / "tokens.txt"
        tokens.write_text("a-long-enough-token-for-the-test-0123456789 alice\n")
        tokens.chmod(0o644)
    done = run(*args, cwd=tmp_path, env={**os.environ, **env})
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    verbose = run(*args, "-v", cwd=tmp_path, env={**os.environ, **env})
    assert verbose.returncode != 0
    if not expected.startswith("mcpkit: no such file") and "key=value" not in expected and "no file" not in expected \
            and "attribute" not in expected:
        assert "Traceback" in verbose.stderr  # -v shows where it came from


@pytest.mark.parametrize(("args", "expected"), [
    (["serve", "--http", "127.0.0.1"], "mcpkit serve: error: argument --http: expected HOST:PORT or PORT"),
    (["proxy", "--timeout", "abc"], "mcpkit proxy: error: argument --timeout"),
    (["serve", "--bogus"], "mcpkit: error: unrecognized arguments: --bogus"),
    (["proxy", "--rate-limit"], "mcpkit proxy: error: argument --rate-limit: expected one argument"),
    (["bogus"], "mcpkit: error: argument COMMAND: invalid choice: 'bogus'"),
])
def test_a_mistyped_option_is_one_line_not_the_usage_of_every_option(tmp_path, args, expected):
    # argparse printed the usage block of every option (18 lines for serve) before the one line
    done = run(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(expected), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--help" in done.stderr  # where the options are


@pytest.mark.parametrize(("env", "flag", "named"), [({"MCPKIT_OTEL": "true"}, [], "MCPKIT_OTEL=true"),
                                                ({}, ["--otel"], "--otel")])
def test_otel_names_what_turned_it_on_when_its_package_is_missing(weather, tmp_path, env, flag, named):
    # MCPKIT_OTEL=true was silently off (only "1" was read)
    blocker = tmp_path / "blocker" / "opentelemetry"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(blocker.parent), os.environ.get("PYTHONPATH", "")])}
    done = run("serve", str(weather), *flag, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"mcpkit: {named} needs opentelemetry-api, which cannot be imported (blocked for "
                                   "the test): pip install 'mcpkit[otel]'  (run with -v for the traceback)"), done.stderr


def test_a_missing_optional_dependency_is_one_line_with_the_pip_command(weather, tmp_path):
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "uvicorn.py").write_text("raise ModuleNotFoundError('No module named uvicorn', name='uvicorn')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    done = run("serve", str(weather), "--http", "127.0.0.1:0", env=env)
    assert done.returncode == 2
    assert "pip install 'mcpkit[http]'" in done.stderr and "Traceback" not in done.stderr


def test_doctor_reports_a_missing_optional_dependency_the_server_uses(tmp_path):
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "redis.py").write_text("raise ModuleNotFoundError('No module named redis', name='redis')\n")
    server = tmp_path / "stored.py"
    server.write_text("from mcpkit import Server\nserver = Server('stored')\n")
    env = {**os.environ, "MCPKIT_STORE": "redis://127.0.0.1:1/0",
           "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    done = run("doctor", env=env)
    assert "redis" in done.stderr and "pip install 'mcpkit[redis]'" in done.stderr
    assert done.returncode == 1


# ------------------------------------------------------------------------------------------ docs


def test_every_environment_switch_the_code_reads_is_in_the_one_table():
    import re

    src = Path(__file__).resolve().parent.parent / "src" / "mcpkit"
    read = set()
    for path in src.rglob("*.py"):
        read |= set(re.findall(r"\b(MCPKIT_[A-Z][A-Z_]*[A-Z])\b", path.read_text()))
    read -= {"MCPKIT_AUTH_", "MCPKIT_IMPORT"}  # a prefix in a help text; a private regex's name
    table = (Path(__file__).resolve().parent.parent / "docs" / "environment.md").read_text()
    documented = set(re.findall(r"^\| `(MCPKIT_[A-Z_]+)` \|", table, re.MULTILINE))
    assert read == documented, (read - documented, documented - read)


def test_docs_documents_gated_tools_defaults_enums_and_manager_actions(tmp_path):
    server = tmp_path / "files.py"
    server.write_text(
        "from typing import Literal\n"
        "from mcpkit import Server\n"
        "from mcpkit.policy import Policy\n"
        "server = Server('files', policy=Policy.secure())\n"
        "@server.tool(destructive=True, open_world=False)\n"
        "def wipe(confirm: bool = False) -> str:\n"
        "    '''Delete everything.'''\n"
        "    return ''\n"
        "files = server.manager('files', description='Manage files.')\n"
        "@files.action(read_only=True, open_world=False)\n"
        "def read(path: str, mode: Literal['text', 'bytes'] = 'text') -> str:\n"
        "    '''Read a file.'''\n"
        "    return ''\n"
        "@files.action(destructive=True, open_world=False)\n"
        "def delete(path: str) -> None:\n"
        "    '''Delete a file.'''\n"
    )
    listed = run("list", str(server), "--json")
    assert [t["name"] for t in json.loads(listed.stdout)["tools"]] == ["files"]  # the gates hide wipe
    docs = run("docs", str(server))
    assert docs.returncode == 0, docs.stderr
    text = docs.stdout
    assert "### `wipe`" in text and "> **Gated:**" in text and "MCPKIT_ALLOW_DESTRUCTIVE=1" in text
    assert "| `confirm` | boolean | no | `false` |  |  |" in text
    assert "#### `files` action `read`" in text and "#### `files` action `delete`" in text
    assert '| `mode` | string | no | `"text"` | `"text"`, `"bytes"` |  |' in text
    delete = text.split("#### `files` action `delete`")[1]
    assert "> **Gated:**" in delete and "| `path` | string | yes |" in delete


# ------------------------------------------------------------------------------------------ servers we did not write

PARTIAL = r"""
import json, sys
# a stdio server that declares resources but has no resources/templates/list, and ignores EOF
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "serverInfo": {"name": "partial", "version": "1"},
                  "capabilities": {"tools": {}, "resources": {}}}
    elif method == "tools/list":
        result = {"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]}
    elif method == "resources/list":
        result = {"resources": [{"uri": "mem://a", "name": "a"}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}),
              flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
import time
time.sleep(60)  # ignores EOF
"""


def test_list_and_docs_show_what_they_got_and_name_the_method_that_failed(tmp_path):
    script = tmp_path / "partial.py"
    script.write_text(PARTIAL)
    target = f"{sys.executable} {script}"
    listed = run("list", target)
    assert listed.returncode == 0, listed.stderr
    assert "hello" in listed.stdout and "mem://a" in listed.stdout
    assert "resources/templates/list failed: -32601: Method not found" in listed.stderr
    # the server ignored EOF: the 5 s it took to stop it are said, once
    assert listed.stderr.count("did not exit when its stdin closed") == 1
    docs = run("docs", target)
    assert docs.returncode == 0 and "### `hello`" in docs.stdout
    assert "## Not documented" in docs.stdout and "`resources/templates/list` failed" in docs.stdout


OFFICIAL_SDK_SERVER = '''
from mcp.server import MCPServer

mcp = MCPServer("official", log_level="WARNING")

@mcp.tool()
def shout(text: str) -> str:
    return text.upper()

if __name__ == "__main__":
    mcp.run()
'''


def test_a_file_built_on_the_official_sdk_runs_as_itself(tmp_path):
    server = tmp_path / "official.py"
    server.write_text(OFFICIAL_SDK_SERVER)
    called = run("call", str(server), "shout", "text=2024")  # not wrapped in mcpkit serve
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"result": "2024"}  # the string field kept "2024" a string
    docs = run("docs", str(server))
    assert docs.returncode == 0, docs.stderr
    assert "### `shout`" in docs.stdout
    entry = json.loads(run("install", "cursor", str(server)).stdout)["mcpServers"]["official"]
    assert entry == {"command": sys.executable, "args": [str(server)]}


def test_a_server_run_from_python_says_where_it_is_too(weather):
    done = subprocess.run([sys.executable, str(weather)], capture_output=True, text=True, timeout=60, input="")
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.startswith("mcpkit: serving weather 1.0 on stdio | ")


def test_url_options_with_a_stdio_target_are_refused(weather):
    done = run("list", str(weather), "--sse")
    assert done.returncode == 2 and "--sse applies to a URL target only" in done.stderr
