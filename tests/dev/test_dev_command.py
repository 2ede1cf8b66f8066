"""`mcpkit dev`: the page and the MCP endpoint on one loopback port, and --reload."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import mcpkit_command

SERVER = '''
from mcpkit import Server
server = Server("live", "1.0")

@server.tool(read_only=True, open_world=False)
def first() -> str:
    return "one"
'''


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(mcpkit_command("dev", *args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    for _ in range(20):
        line = proc.stderr.readline()
        found = re.search(r"inspector at (http://127\.0\.0\.1:\d+)/", line)
        if found:
            return proc, found.group(1)
    proc.kill()
    raise AssertionError("mcpkit dev did not start")


@pytest.fixture
def live(tmp_path: Path) -> Path:
    path = tmp_path / "live.py"
    path.write_text(SERVER)
    return path


@pytest.fixture
def stop() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_dev_serves_the_page_and_the_server_on_one_port(live, stop):
    proc, base = _start(str(live), "--port", "0")
    stop.append(proc)
    page = httpx.get(base + "/")
    assert page.status_code == 200 and "<script src=\"/static/app.js\"" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]  # no CDN, nothing remote
    assert httpx.get(base + "/static/app.js").headers["content-type"].startswith("text/javascript")
    assert httpx.get(base + "/static/../cli.py").status_code == 404
    info = httpx.get(base + "/dev/info.json").json()
    assert info["name"] == "live" and info["endpoint"] == "/mcp" and "2026-07-28" in info["revisions"]
    listed = subprocess.run(mcpkit_command("list", base + "/mcp", "--json"), capture_output=True, text=True,
                            timeout=60)
    assert [t["name"] for t in json.loads(listed.stdout)["tools"]] == ["first"]


def test_dev_reload_restarts_the_server_when_its_file_changes(live, stop):
    proc, base = _start(str(live), "--port", "0", "--reload")
    stop.append(proc)
    live.write_text(SERVER + '''
@server.tool(read_only=True, open_world=False)
def second() -> str:
    return "two"
''')
    deadline = time.monotonic() + 60
    names: list[str] = []
    while time.monotonic() < deadline:
        listed = subprocess.run(mcpkit_command("list", base + "/mcp", "--json"), capture_output=True, text=True,
                                timeout=60)
        if listed.returncode == 0:
            names = [t["name"] for t in json.loads(listed.stdout)["tools"]]
            if names == ["first", "second"]:
                break
        time.sleep(0.3)
    assert names == ["first", "second"]


@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["/", "/index.html", "/dev/info.json", "/static/app.js", "/static/client.js",
                                  "/static/forms.js", "/favicon.ico"])
async def test_the_page_and_its_info_keep_the_host_and_origin_checks_of_mcp(path: str) -> None:
    """DNS rebinding: a site whose name now points at 127.0.0.1 reads nothing, not even the
    server's name and version."""
    from mcpkit import Server
    from mcpkit.dev.app import DevApp
    from tests.test_http import AsgiDriver

    server = Server("secret-name", "9.9")
    driver = AsgiDriver(DevApp(server, server.http_app()))
    rebound = await driver.open("GET", path, {"host": "attacker.example:8000"})
    assert rebound.status == 403 and b"secret-name" not in await rebound.read()
    foreign = await driver.open("GET", path, {"host": "127.0.0.1:8000", "origin": "http://attacker.example"})
    assert foreign.status == 403
    ok = await driver.open("GET", path, {"host": "127.0.0.1:8000"})
    assert ok.status in (200, 204)
    if path == "/dev/info.json":
        assert json.loads(await ok.read())["name"] == "secret-name"


GATED = SERVER + '''
@server.tool(read_only=True)
def fetch(url: str) -> str:
    """Reaches outside the server: open-world is undeclared."""
    return url
'''


def test_dev_info_names_the_tools_the_policy_gates_with_the_reason(tmp_path, stop):
    # TL-14: a gated tool is listed nowhere over MCP; the page learns it from the dev app, as
    # `mcpkit docs` marks it, so it can show it greyed rather than let it vanish
    path = tmp_path / "gated.py"
    path.write_text(GATED)
    proc, base = _start(str(path), "--port", "0", "--policy")
    stop.append(proc)
    info = httpx.get(base + "/dev/info.json").json()
    assert [g["name"] for g in info["gated"]] == ["fetch"]
    assert "set MCPKIT_ALLOW_OPEN_WORLD=1" in info["gated"][0]["reason"]
    assert info["gated"][0]["inputSchema"]["required"] == ["url"]
    listed = subprocess.run(mcpkit_command("list", base + "/mcp", "--json"), capture_output=True, text=True, timeout=60)
    assert [t["name"] for t in json.loads(listed.stdout)["tools"]] == ["first"]  # still hidden over MCP
    proc, base = _start(str(path), "--port", "0")
    stop.append(proc)
    assert httpx.get(base + "/dev/info.json").json()["gated"] == []  # no policy: nothing gated


KEYED = '''
from mcpkit import Context, Server
from mcpkit.auth import ApiKeyAuth

server = Server("keyed", "1.0", auth=ApiKeyAuth(passthrough=True, env="KEYED_API_KEY"))

@server.tool(read_only=True, open_world=False)
def whoami(ctx: Context) -> str:
    return f"{ctx.principal} {ctx.access_token.key[:4]}"
'''


def test_dev_serves_a_keyed_server_with_the_key_its_stdio_launch_reads(tmp_path, stop, monkeypatch):
    # the page cannot send X-API-Key: a server with ApiKeyAuth answered it 401 under mcpkit dev
    path = tmp_path / "keyed.py"
    path.write_text(KEYED)
    missing = subprocess.run(mcpkit_command("dev", str(path), "--port", "0"), capture_output=True, text=True,
                             timeout=60, env={k: v for k, v in __import__("os").environ.items() if k != "KEYED_API_KEY"})
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1, missing.stderr
    assert "KEYED_API_KEY is not set" in missing.stderr
    monkeypatch.setenv("KEYED_API_KEY", "dk_live_0123456789abcdef")
    proc, base = _start(str(path), "--port", "0")
    stop.append(proc)
    called = subprocess.run(mcpkit_command("call", base + "/mcp", "whoami"), capture_output=True,
                            text=True, timeout=60)
    assert called.returncode == 0, called.stderr
    assert "dk_l" in called.stdout and "key:" in called.stdout, called.stdout
