"""What a user of ``pip install mcpkit`` (no extra) meets: every command and option that needs an
optional package says which extra in one line and exits 2, and serving stdio works.

One virtualenv per session, with mcpkit installed from this checkout the way a user installs it
(``pip install <checkout>``: its dependencies resolved by pip, nothing more).
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# building the venv and installing into it takes a few seconds, more on a slow network
pytestmark = pytest.mark.timeout(600)

SERVER = """\
from mcpkit import Server

server = Server("core", "1.0")


@server.tool(read_only=True, open_world=False)
def hello(name: str) -> str:
    return f"hello {name}"


if __name__ == "__main__":
    import sys

    server.run(*sys.argv[1:])
"""

URL = "http://127.0.0.1:9/mcp"  # never reached: the missing package is named before any connection
AUTH = ["--resource", "https://mcp.example.com/mcp", "--issuer", "https://id.example.com"]


@pytest.fixture(scope="session")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with ``pip install <this checkout>`` only; its bin directory."""
    home = tmp_path_factory.mktemp("core-install")
    venv.EnvBuilder(with_pip=True).create(home / "venv")
    python = home / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
                          capture_output=True, text=True, timeout=540, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                            timeout=60, env=env, check=True)
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    assert installed - {"pip", "setuptools", "wheel"} == {"mcpkit", "orjson", "jsonschema-rs", "pyyaml"}, installed
    (home / "server.py").write_text(SERVER)
    (home / "regex_server.py").write_text("import re2\n" + SERVER)  # examples/workspace.py's search
    (home / "model_server.py").write_text("from pydantic import BaseModel\n" + SERVER)
    (home / "search_server.py").write_text(SERVER.replace('Server("core", "1.0")',
                                                          'Server("core", "1.0", tool_search=True)'))
    (home / "openapi_server.py").write_text(SERVER + "\nserver.openapi({'openapi': '3.1.0', 'info': {'title': 'x', "
                                            "'version': '1'}, 'paths': {}}, base_url='http://127.0.0.1:9')\n")
    return home


def run(core: Path, *argv: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("MCPKIT_")}
    command = [str(core / "venv" / "bin" / argv[0]), *argv[1:]]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=core, input=stdin,
                          env={**clean, **(env or {})}, check=False)


@pytest.mark.parametrize(("argv", "env", "extras"), [
    (["serve", "server.py", "--http", "127.0.0.1:0"], {}, "http"),
    (["serve", "server.py", "--http", "127.0.0.1:0", "--workers", "2"], {}, "http"),
    (["serve", "server.py", "--http", "127.0.0.1:0", "--metrics"], {}, "http,metrics"),
    (["serve", "server.py", "--otel"], {}, "otel"),
    (["serve", "server.py"], {"MCPKIT_OTEL": "1"}, "otel"),
    (["serve", "server.py", "--http", "127.0.0.1:0", "--auth", "jwt", *AUTH], {}, "http,auth"),
    (["serve", "server.py", "--http", "127.0.0.1:0"], {"MCPKIT_AUTH": "jwt", "MCPKIT_AUTH_ISSUER": AUTH[3],
                                                        "MCPKIT_AUTH_RESOURCE": AUTH[1]}, "http,auth"),
    (["serve", "server.py", "--http", "127.0.0.1:0", "--auth", "introspection", *AUTH,
      "--introspection-url", "https://id.example.com/introspect"], {}, "http"),
    (["serve", "server.py"], {"MCPKIT_STORE": "redis://127.0.0.1:1/0"}, "redis"),
    (["serve", "regex_server.py"], {}, "regex"),
    (["serve", "model_server.py"], {}, "pydantic"),
    (["serve", "openapi_server.py"], {}, "openapi"),  # server.openapi(...)
    (["serve", "search_server.py"], {}, "search"),  # Server(tool_search=...)
    (["proxy", "--tool-search", "--", "python", "server.py"], {}, "search"),
    (["dev", "server.py"], {}, "http"),
    (["dev", "server.py", "--reload"], {}, "http,reload"),
    (["list", URL], {}, "client"),
    (["call", URL, "hello", "name=a"], {}, "client"),
    (["read", URL, "file:///x"], {}, "client"),
    (["prompt", URL, "p"], {}, "client"),
    (["docs", URL], {}, "client"),
    (["check", URL], {}, "client"),
    (["proxy", URL], {}, "client"),
    (["proxy", "--http", "127.0.0.1:0", "--", "python", "server.py"], {}, "http"),
    (["serve", "server.py", "--http", "127.0.0.1:0", "--loop", "uvloop"], {}, "fast"),
    (["serve", "server.py", "--http", "127.0.0.1:0"], {"MCPKIT_LOOP": "uvloop"}, "fast"),
    (["python", "server.py", "http"], {}, "http"),  # server.run("http")
])
def test_what_needs_an_extra_says_which_in_one_line(core, argv, env, extras):
    # serve --http said "unexpected error: ModuleNotFoundError: No module named 'h11'" (exit 1);
    # --metrics and --auth jwt "unexpected error: ImportError" (exit 1)
    done = run(core, *(argv if argv[0] == "python" else ["mcpkit", *argv]), env=env)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and f"pip install 'mcpkit[{extras}]'" in lines[0], lines
    assert "unexpected" not in lines[0] and "Traceback" not in lines[0]


def test_the_core_serves_stdio(core):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hello", "arguments": {"name": "a"}}}
    stdin = "".join(json.dumps(m) + "\n" for m in (initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                                                   call))
    for argv in (["mcpkit", "serve", "server.py"], ["python", "server.py"]):
        done = run(core, *argv, stdin=stdin)
        assert done.returncode == 0, done.stderr
        answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
        assert answers[1]["result"]["serverInfo"]["name"] == "core"
        assert answers[2]["result"]["content"] == [{"type": "text", "text": "hello a"}]
