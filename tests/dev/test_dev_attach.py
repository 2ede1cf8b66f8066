"""`mcpkit dev` in front of any server (through the proxy) and `--reload` restarting the server
behind the page, not the page: its port and its session stay, the new lists come at once, a load
error is told (file:line, message) until it is fixed, and only the server's own files count."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpkit import Client
from tests.conftest import mcpkit_command

LIVE = '''
from mcpkit import Server
import helper

server = Server("live", "1.0")

@server.tool(read_only=True, open_world=False)
def first() -> str:
    return helper.WORD
'''

SECOND = '''
@server.tool(read_only=True, open_world=False)
def second() -> str:
    return "two"
'''


class Running:
    """A running ``mcpkit`` command, its stderr read line by line."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(mcpkit_command(*args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []

    def until(self, pattern: str) -> re.Match[str]:
        """Read stderr up to the line matching ``pattern`` (the process ends: it is not there)."""
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError(f"it ended before {pattern!r}:\n{''.join(self.lines)}")
            self.lines.append(line)
            found = re.search(pattern, line)
            if found:
                return found

    def stop(self) -> str:
        """Ctrl-C; everything it wrote on stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(2)
        try:
            out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        assert "Traceback" not in out, out
        return "".join(self.lines) + err


class Dev(Running):
    """A running `mcpkit dev` on a free port, and its base URL."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        super().__init__("dev", *args, "--port", "0", env=env)
        self.base = self.until(r"inspector at (http://127\.0\.0\.1:\d+)/").group(1)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "helper.py").write_text('WORD = "one"\n')
    (tmp_path / "live.py").write_text(LIVE)
    (tmp_path / "notes.py").write_text("# not imported by the server\n")
    return tmp_path


@pytest.fixture
def devs() -> Iterator[list[Dev]]:
    running: list[Dev] = []
    yield running
    for dev in running:
        if dev.proc.poll() is None:
            dev.proc.kill()
            dev.proc.communicate()


def _events(base: str) -> Iterator[dict[str, Any]]:
    """The page's /dev/events stream, event by event (the current state first)."""
    with httpx.stream("GET", base + "/dev/events", timeout=httpx.Timeout(60.0)) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line[len("data: "):])


def _until(events: Iterator[dict[str, Any]], state: str) -> dict[str, Any]:
    for event in events:
        if event["state"] == state:
            return event
    raise AssertionError(f"the event stream ended before {state!r}")


@pytest.mark.asyncio
async def test_reload_keeps_the_page_port_and_session_and_lists_the_new_tool_at_once(folder, devs):
    dev = Dev(str(folder / "live.py"), "--reload")
    devs.append(dev)
    changed = asyncio.Event()

    def heard(message: dict[str, Any]) -> None:
        if message.get("method") == "notifications/tools/list_changed":
            changed.set()

    async with Client(dev.base + "/mcp", on_notification=heard) as client:
        assert [t["name"] for t in await client.list_tools()] == ["first"]
        session = client.transport.session_id
        (folder / "live.py").write_text(LIVE + SECOND)
        names: list[str] = []
        while names != ["first", "second"]:  # list_changed comes at the restart's withdrawal and its new list
            await asyncio.wait_for(changed.wait(), 60)
            changed.clear()
            names = [t["name"] for t in await client.list_tools()]
        # the same session, on the same port: the page never lost its server
        assert client.transport.session_id == session
        assert (await client.call_tool("second", {}))["content"][0]["text"] == "two"
    said = dev.stop()
    assert "live.py changed; restarting" in said
    assert "Traceback" not in said and "CancelledError" not in said, said


def test_only_a_file_the_server_imported_restarts_it(folder, devs):
    dev = Dev(str(folder / "live.py"), "--reload")
    devs.append(dev)
    (folder / "notes.py").write_text("# edited, and still not imported\n")
    (folder / "helper.py").write_text('WORD = "uno"\n')
    restarted = dev.until(r"mcpkit dev: (.*) changed; restarting")
    assert restarted.group(1) == "helper.py"  # notes.py, changed first, is not the server's
    dev.until("the server is up again")
    called = subprocess.run(mcpkit_command("call", dev.base + "/mcp", "first"), capture_output=True, text=True,
                            timeout=60)
    assert "uno" in called.stdout, called.stderr
    said = dev.stop()
    assert "notes.py" not in said and "Traceback" not in said, said


def test_a_load_error_is_told_with_its_line_until_a_change_fixes_it(folder, devs):
    dev = Dev(str(folder / "live.py"), "--reload")
    devs.append(dev)
    events = _events(dev.base)
    assert next(events)["state"] == "up"
    (folder / "live.py").write_text(LIVE + "\ndef broken(:\n    pass\n")
    down = _until(events, "down")
    assert down["error"] == f"{os.path.realpath(folder / 'live.py')}:11: SyntaxError: invalid syntax", down
    # an exception while importing: the developer's line of it, not importlib's
    (folder / "live.py").write_text(LIVE + "\nraise ValueError('no forecast today')\n")
    down = _until(events, "down")
    assert down["error"] == f"{os.path.realpath(folder / 'live.py')}:11: ValueError: no forecast today", down
    (folder / "live.py").write_text(LIVE + SECOND)
    up = _until(events, "up")
    assert up["error"] is None and up["name"] == "live"
    said = dev.stop()
    assert said.count("live.py:11: SyntaxError: invalid syntax") == 1, said  # said once, not at every retry
    assert "Traceback" not in said, said


def test_a_server_that_does_not_load_at_start_is_waited_for(folder, devs):
    (folder / "live.py").write_text(LIVE + "\nraise ValueError('not yet')\n")
    dev = Dev(str(folder / "live.py"), "--reload")
    devs.append(dev)
    events = _events(dev.base)
    assert "ValueError: not yet" in _until(events, "down")["error"]
    (folder / "live.py").write_text(LIVE)
    _until(events, "up")
    listed = subprocess.run(mcpkit_command("list", dev.base + "/mcp", "--json"), capture_output=True, text=True,
                            timeout=60)
    assert [t["name"] for t in json.loads(listed.stdout)["tools"]] == ["first"]
    assert "Traceback" not in dev.stop()


RELAYED = '''
from mcpkit import Context, Server

server = Server("relayed", "1.0")

@server.tool(read_only=True, open_world=False)
async def ask(ctx: Context) -> str:
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    sampled = await ctx.sample("say hi")
    roots = await ctx.roots()
    return f"{answer['content']['name']} {sampled['content']['text']} {roots['roots'][0]['uri']}"

@server.tool(read_only=True, open_world=False)
async def work(ctx: Context) -> str:
    await ctx.report_progress(1, 2, "half")
    await ctx.info("working hard")
    await ctx.report_progress(2, 2, "done")
    server.notify_resource_updated("data://x")
    return "worked"

@server.resource("data://x")
def x() -> str:
    return "x"
'''


@pytest.mark.asyncio
async def test_requests_and_notifications_pass_between_the_page_and_the_server_behind_it(tmp_path, devs):
    (tmp_path / "relayed.py").write_text(RELAYED)
    dev = Dev(str(tmp_path / "relayed.py"), "--reload")  # served by the child, behind the proxy
    devs.append(dev)
    logs: list[str] = []
    updated = asyncio.Event()

    def heard(message: dict[str, Any]) -> None:
        if message.get("method") == "notifications/resources/updated":
            updated.set()

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Zoe"}}

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "hi!"}, "model": "m"}

    async with Client(dev.base + "/mcp", elicitation_handler=elicit, sampling_handler=sample,
                      roots=[{"uri": "file:///work", "name": "work"}], on_notification=heard,
                      on_log=lambda p: logs.append(p["data"])) as client:
        asked = await client.call_tool("ask", {})
        assert asked["content"][0]["text"] == "Zoe hi! file:///work", asked
        await client.subscribe("data://x")
        progress: list[tuple[Any, ...]] = []
        done = await client.call_tool("work", {}, progress=lambda *p: progress.append(p))
        assert done["content"][0]["text"] == "worked"
        assert [p[:2] for p in progress] == [(1, 2), (2, 2)]
        assert "working hard" in logs
        await asyncio.wait_for(updated.wait(), 30)
    assert "Traceback" not in dev.stop()


KEYED = '''
from mcpkit import Context, Server
from mcpkit.auth import ApiKeyAuth

server = Server("keyed", "1.0", auth=ApiKeyAuth(passthrough=True, env="KEYED_API_KEY"))

@server.tool(read_only=True, open_world=False)
def whoami(ctx: Context) -> str:
    return "key " + ctx.access_token.key[:4]
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dev_attaches_to_a_url_with_its_headers(tmp_path, devs):
    (tmp_path / "keyed.py").write_text(KEYED)
    port = _free_port()
    served = subprocess.Popen(mcpkit_command("serve", str(tmp_path / "keyed.py"), "--http", f"127.0.0.1:{port}"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert "serving keyed" in served.stderr.readline()
        url = f"http://127.0.0.1:{port}/mcp"
        dev = Dev(url, "--header", "X-API-Key: dk_live_0123456789abcdef")
        devs.append(dev)
        assert httpx.get(dev.base + "/dev/info.json").json()["attached"] == url
        called = subprocess.run(mcpkit_command("call", dev.base + "/mcp", "whoami"), capture_output=True,
                                text=True, timeout=60)
        assert "key dk_l" in called.stdout, called.stderr
        assert "Traceback" not in dev.stop()
    finally:
        served.terminate()
        served.wait(20)


@pytest.mark.parametrize("args, said", [
    (["node build/index.js"], "did not start"),
    ([f"{sys.executable} -c 'pass'", "--reload"], "dev --reload applies to an mcpkit server"),
    ([f"{sys.executable} -c 'pass'", "--header", "A: b"], "--header applies to a URL target only"),
])
def test_dev_says_in_one_line_what_it_cannot_attach_to(args, said):
    done = subprocess.run(mcpkit_command("dev", *args, "--port", "0"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    # a server that ran and failed said why on its stderr (shown as it came); then dev's one line
    lines = done.stderr.splitlines()
    assert said in lines[-1] and not any(said in line for line in lines[:-1]), done.stderr
    if said != "did not start":
        assert len(lines) == 1, done.stderr


FAILING = '''from mcpkit import Server

server = Server("failing", "1.0")


@server.resource("data://boom")
def boom() -> str:
    raise RuntimeError("disk on fire")


@server.tool(read_only=True, open_world=False)
def broken() -> str:
    raise RuntimeError("tool on fire")
'''


@pytest.mark.parametrize("reload", [False, True], ids=["loaded", "behind-the-proxy"])
def test_in_development_an_internal_error_names_the_exception_and_its_line(tmp_path, devs, reload):
    path = tmp_path / "failing.py"
    path.write_text(FAILING)
    dev = Dev(str(path), *(["--reload"] if reload else []))
    devs.append(dev)
    read = subprocess.run(mcpkit_command("read", dev.base + "/mcp", "data://boom"), capture_output=True, text=True,
                          timeout=60)
    assert re.search(rf"Internal error: RuntimeError: disk on fire at {re.escape(str(path))}:8 \(correlation id "
                     r"[0-9a-f]{16}\)", read.stderr), read.stderr
    called = subprocess.run(mcpkit_command("call", dev.base + "/mcp", "broken"), capture_output=True, text=True,
                            timeout=60)
    assert f"RuntimeError: tool on fire at {path}:13" in called.stderr, called.stderr
    said = dev.stop()  # and the server's log line, with the traceback, in dev's terminal
    assert 'raise RuntimeError("disk on fire")' in said and "CancelledError" not in said, said


def test_serve_v_names_the_exception_and_production_does_not(tmp_path):
    path = tmp_path / "failing.py"
    path.write_text(FAILING)

    async def read(*flags: str) -> Any:
        async with Client(mcpkit_command("serve", str(path), *flags), inherit_env=True) as client:
            try:
                await client.read_resource("data://boom")
            except Exception as exc:  # noqa: BLE001 - the RpcError is the point
                return exc
        raise AssertionError("the read did not fail")

    verbose, quiet = asyncio.run(read("-v")), asyncio.run(read())
    assert verbose.message == f"Internal error: RuntimeError: disk on fire at {path}:8."
    assert quiet.message == "Internal error." and "disk" not in json.dumps(quiet.data)
    assert re.fullmatch(r"[0-9a-f]{16}", quiet.data["correlationId"])


@pytest.mark.asyncio
async def test_the_event_stream_keeps_the_host_and_origin_checks_of_mcp() -> None:
    """DNS rebinding: a site whose name now points at 127.0.0.1 does not follow the server's
    state (its load errors name files of this machine)."""
    from mcpkit import Server
    from mcpkit.dev.app import DevApp
    from tests.test_http import AsgiDriver

    server = Server("secret-name", "9.9")
    driver = AsgiDriver(DevApp(server, server.http_app()))
    rebound = await driver.open("GET", "/dev/events", {"host": "attacker.example:8000"})
    assert rebound.status == 403
    foreign = await driver.open("GET", "/dev/events", {"host": "127.0.0.1:8000", "origin": "http://attacker.example"})
    assert foreign.status == 403
    await driver.aclose()
