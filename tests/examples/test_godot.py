"""examples/godot against a real headless Godot 3 (godot3-server): scenes built through MCP land
in the .tscn file Godot writes; Godot killed mid-call and brought back.

These tests need godot3-server (tools/install-godot.sh installs it); without it they fail in CI
and skip elsewhere.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import component_missing

from mcpkit.policy.audit import read_lines
from mcpkit.protocol.errors import E_NOT_CONNECTED, E_PERMISSION_DENIED
from tests.harness import connect
from tests.test_stdio import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "godot"
TOKEN = "test-token-0123456789abcdef"
CHANGED = "notifications/tools/list_changed"
UP_TIMEOUT = 60.0  # Godot's start on a loaded 2-core machine; a bound, not a sleep
_modules = itertools.count()


def godot_binary() -> str:
    found = shutil.which(os.environ.get("GODOT_BIN", "godot3-server"))
    if found is None:
        component_missing("godot3-server is not installed: run tools/install-godot.sh (these tests need a real Godot)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Godot:
    """godot3-server running examples/godot/bridge.gd in a project, in its own process group."""

    def __init__(self, project: Path, port: int) -> None:
        self.project, self.port = project, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = project.parent / "godot.log"

    def start(self) -> Godot:
        env = {**os.environ, "GODOT_BRIDGE_PORT": str(self.port), "GODOT_BRIDGE_TOKEN": TOKEN, "HOME": str(self.project.parent)}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([godot_binary(), "--path", str(self.project), "-s", str(EXAMPLE / "bridge.gd")],
                                         env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


@pytest.fixture
def project() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="godot-", dir="/tmp"))
    root = base / "game"
    root.mkdir()
    (root / "project.godot").write_text('config_version=4\n\n[application]\n\nconfig/name="game"\n')
    (root / "ci_check.gd").write_text(
        'extends SceneTree\n\nfunc _initialize():\n\tprint(to_json({"check": "ok", "nodes": 3}))\n\tquit(0)\n')
    yield root
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def godot(project: Path) -> Iterator[Godot]:
    engine = Godot(project, free_port()).start()
    yield engine
    engine.kill()


def load_example(monkeypatch: pytest.MonkeyPatch, godot: Godot, **env: str) -> Any:
    """A fresh copy of examples/godot/server.py configured for this Godot (its globals are per load)."""
    monkeypatch.setenv("GODOT_PROJECT", str(godot.project))
    monkeypatch.setenv("GODOT_BRIDGE_PORT", str(godot.port))
    monkeypatch.setenv("GODOT_BRIDGE_TOKEN", TOKEN)
    monkeypatch.setenv("GODOT_PROBE_INTERVAL", "0.3")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location(f"godot_example_{next(_modules)}", EXAMPLE / "server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def call(h: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await h.request("tools/call", {"name": tool, "arguments": arguments}, timeout=60)
    return result["structuredContent"]


async def ok(h: Any, tool: str, **arguments: Any) -> Any:
    envelope = await call(h, tool, **arguments)
    assert envelope["ok"] is True, envelope
    return envelope["result"]


@pytest.mark.asyncio
async def test_scenes_built_through_mcp_are_saved_by_godot(monkeypatch: pytest.MonkeyPatch, godot: Godot,
                                                           wire: Any) -> None:
    example = load_example(monkeypatch, godot, MCPKIT_ALLOW_DESTRUCTIVE="1")
    example.godot.start()
    try:
        assert await example.godot.wait_up(UP_TIMEOUT), example.godot.last_error
        async with connect(example.server, wire) as h:
            scene = "res://levels/main.tscn"
            root = await ok(h, "scene", action="create", path=scene, root_type="Node2D")
            assert root == {"name": "main", "type": "Node2D", "path": ".", "position": [0, 0], "children": []}
            await ok(h, "node", action="add", scene=scene, name="Player", type="KinematicBody2D")
            await ok(h, "node", action="add", scene=scene, name="Sprite", type="Sprite", parent="Player")
            await ok(h, "node", action="add", scene=scene, name="Camera", type="Camera2D")
            await ok(h, "node", action="add", scene=scene, name="Scratch", type="Node")
            moved = await ok(h, "node", action="move", scene=scene, node="Camera", new_parent="Player")
            assert moved["path"] == "Player/Camera"
            await ok(h, "node", action="set", scene=scene, node="Player", property="position", value=[64, 32])
            await ok(h, "node", action="set", scene=scene, node="Player", property="modulate", value="#ff0000")
            assert (await ok(h, "node", action="delete", scene=scene, node="Scratch")) == {"deleted": "Scratch"}
            missing = await call(h, "node", action="set", scene=scene, node="Player", property="nope", value=1)
            assert missing["ok"] is False and missing["error"]["code"] == "E_NOT_FOUND"
            bad_type = await call(h, "node", action="add", scene=scene, name="X", type="NotAClass")
            assert bad_type["error"]["code"] == "E_SCHEMA_VALIDATION"
            saved = await ok(h, "scene", action="save", path=scene)
            assert saved == {"path": scene, "nodes": 4}

            text = (godot.project / "levels" / "main.tscn").read_text()
            assert text.startswith("[gd_scene format=2]")
            assert '[node name="main" type="Node2D"]' in text
            assert '[node name="Player" type="KinematicBody2D" parent="."]' in text
            assert '[node name="Sprite" type="Sprite" parent="Player"]' in text
            assert '[node name="Camera" type="Camera2D" parent="Player"]' in text
            assert "position = Vector2( 64, 32 )" in text and "modulate = Color( 1, 0, 0, 1 )" in text
            assert "Scratch" not in text

            # Godot reads back what it wrote
            await ok(h, "scene", action="close", path=scene)
            reopened = await ok(h, "scene", action="open", path=scene)
            assert [c["name"] for c in reopened["children"]] == ["Player"]
            assert [c["name"] for c in reopened["children"][0]["children"]] == ["Sprite", "Camera"]

            # res:// paths stay in the project, before anything reaches Godot
            escape = await call(h, "scene", action="create", path="res://../outside.tscn")
            assert escape["error"]["code"] == E_PERMISSION_DENIED
            hidden = await call(h, "scene", action="create", path="res://.godot_mcp/x.tscn")
            assert hidden["error"]["code"] == E_PERMISSION_DENIED
            assert not (godot.project.parent / "outside.tscn").exists()
        lines = read_lines(godot.project / ".godot_mcp" / "audit.log")
        assert [(e["tool"], e["action"], e["outcome"]) for e in lines[:2]] == [
            ("scene", "create", "ok"), ("node", "add", "ok")]
        assert all(e["durationMs"] >= 0 for e in lines)
        # a refused path never reaches the handler: denied, with the engine path it was sent
        refused = [e for e in lines if e["outcome"] == "denied" and e["code"] == E_PERMISSION_DENIED]
        assert [e["paths"] for e in refused] == [[{"engine": "res://../outside.tscn", "resolved": None}],
                                                 [{"engine": "res://.godot_mcp/x.tscn", "resolved": None}]]
        # each line carries the engine path beside the real file it named
        assert lines[0]["paths"] == [{"engine": scene, "resolved": str(godot.project / "levels" / "main.tscn")}]
        assert lines[0]["project"] == str(godot.project)
    finally:
        example.godot.stop()


@pytest.mark.asyncio
async def test_gates_leave_read_only_actions_and_refuse_deletes(monkeypatch: pytest.MonkeyPatch, godot: Godot,
                                                               wire: Any) -> None:
    example = load_example(monkeypatch, godot, MCPKIT_READ_ONLY="1")
    example.godot.start()
    try:
        assert await example.godot.wait_up(UP_TIMEOUT), example.godot.last_error
        async with connect(example.server, wire) as h:
            tools = {t["name"]: t for t in (await h.request("tools/list"))["tools"]}
            assert set(tools) == {"scene", "engine"}  # node has no read-only action
            assert tools["scene"]["inputSchema"]["properties"]["action"]["enum"] == ["open", "tree"]
            refused = await call(h, "scene", action="create", path="res://a.tscn")
            assert refused["ok"] is False and refused["error"]["code"] == E_PERMISSION_DENIED
            assert "read-only" in refused["error"]["message"]
            assert not (godot.project / "a.tscn").exists()
    finally:
        example.godot.stop()


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_killing_godot_mid_call_then_bringing_it_back(monkeypatch: pytest.MonkeyPatch, godot: Godot,
                                                            wire: Any) -> None:
    example = load_example(monkeypatch, godot)
    example.godot.start()
    again: Godot | None = None
    try:
        assert await example.godot.wait_up(UP_TIMEOUT), example.godot.last_error
        async with connect(example.server, wire) as h:
            listed = {t["name"] for t in (await h.request("tools/list"))["tools"]}
            assert {"scene", "node", "engine", "run_project"} <= listed
            # destructive actions need MCPKIT_ALLOW_DESTRUCTIVE=1, which this server was not given
            refused = await call(h, "node", action="delete", scene="res://main.tscn", node="Player")
            assert refused["error"]["code"] == E_PERMISSION_DENIED and "destructive" in refused["error"]["message"]
            before = len(h.notifications_of(CHANGED))
            pending = asyncio.ensure_future(call(h, "engine", action="wait", ms=30000))
            await h.eventually(lambda: example.godot.stats["connects"] >= 1 and _waiting(example), timeout=30)
            godot.kill()
            failed = await asyncio.wait_for(pending, 60)
            assert failed["ok"] is False
            assert failed["error"]["code"] == E_NOT_CONNECTED and failed["error"]["retryable"] is True
            await h.wait_notification(CHANGED, before + 1, timeout=60)
            down = {t["name"] for t in (await h.request("tools/list"))["tools"]}
            assert down == {"run_project"}  # the bridged tools are hidden while Godot is gone
            refused = await call(h, "scene", action="tree", path="res://main.tscn")
            assert refused["error"]["code"] == E_NOT_CONNECTED
            details = refused["error"]["details"]
            assert details["retryAfterMs"] >= 1 and details["breaker"] in ("closed", "open") and details["lastError"]

            again = Godot(godot.project, godot.port).start()
            await h.wait_notification(CHANGED, before + 2, timeout=UP_TIMEOUT)
            back = {t["name"] for t in (await h.request("tools/list"))["tools"]}
            assert back == listed
            info = await ok(h, "engine", action="info")
            assert info["version"].startswith("3.")
            # one list_changed for the return, however many probes and reconnects it took
            await asyncio.sleep(1.0)
            assert len(h.notifications_of(CHANGED)) == before + 2
    finally:
        example.godot.stop()
        if again is not None:
            again.kill()


def _waiting(example: Any) -> bool:
    conn = example.godot._conn
    return conn is not None and bool(conn.pending)


@pytest.mark.asyncio
async def test_run_project_headless_captures_output_and_is_gated(monkeypatch: pytest.MonkeyPatch, godot: Godot,
                                                                 wire: Any) -> None:
    example = load_example(monkeypatch, godot)
    async with connect(example.server, wire) as h:
        closed = await call(h, "run_project", script="res://ci_check.gd")
        assert closed["error"]["code"] == E_PERMISSION_DENIED and "ALLOW_EXTERNAL_TOOLS" in closed["error"]["suggestedFix"]
        monkeypatch.setenv("ALLOW_EXTERNAL_TOOLS", "1")
        run = await ok(h, "run_project", script="res://ci_check.gd", timeout_seconds=120)
        assert run["exitCode"] == 0 and not run["timedOut"]
        assert run["jsonLines"] == [{"check": "ok", "nodes": 3}]
        escape = await call(h, "run_project", script="res://../../etc/passwd")
        assert escape["error"]["code"] == E_PERMISSION_DENIED
    example.godot.stop()


def test_the_example_runs_over_stdio(godot: Godot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GODOT_PROJECT", str(godot.project))
    monkeypatch.setenv("GODOT_BRIDGE_PORT", str(godot.port))
    monkeypatch.setenv("GODOT_BRIDGE_TOKEN", TOKEN)
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src"))
    server = ServerProcess([sys.executable, str(EXAMPLE / "server.py")], cwd=str(ROOT))
    try:
        server.initialize()
        deadline = time.monotonic() + UP_TIMEOUT  # bounded: until Godot is connected
        names: set[str] = set()
        while "scene" not in names and time.monotonic() < deadline:
            others: list[Any] = []
            rid = server.request("tools/list")
            names = {t["name"] for t in server.answer(rid, timeout=60, others=others)["result"]["tools"]}
            if "scene" not in names:
                time.sleep(0.1)
        assert "scene" in names, server.stderr()[-2000:]
        answer = server.call("tools/call", {"name": "scene", "arguments": {"action": "create", "path": "res://s.tscn"}})
        assert answer["result"]["structuredContent"]["ok"] is True
        answer = server.call("tools/call", {"name": "scene", "arguments": {"action": "save", "path": "res://s.tscn"}})
        assert answer["result"]["structuredContent"]["result"]["nodes"] == 1
        assert (godot.project / "s.tscn").read_text().startswith("[gd_scene")
    finally:
        server.kill()
