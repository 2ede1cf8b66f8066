"""examples/unity_bridge.py against a fake Unity editor plugin (length-prefixed JSON-RPC on TCP):
tools published at run time, mirrored; a schema-version bump; the editor leaving and returning."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.bridge import LengthPrefixed
from mcpkit.protocol.errors import E_NOT_CONNECTED, E_NOT_FOUND, E_PERMISSION_DENIED
from tests.bridge.backend import Backend, BackendError
from tests.harness import connect

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "unity_bridge.py"
TOKEN = "unity-token-0123456789"
CHANGED = "notifications/tools/list_changed"
_modules = itertools.count()

SCENE_COMMANDS = [
    {"command": "get_hierarchy", "summary": "The open scene's hierarchy.", "readOnly": True,
     "args": {"depth": {"type": "integer", "minimum": 1}}},
    {"command": "create_gameobject", "summary": "Create a GameObject.",
     "args": {"name": {"type": "string"}, "parent": {"type": "string"}}, "required": ["name"]},
    {"command": "delete_gameobject", "summary": "Delete a GameObject.", "destructive": True,
     "args": {"name": {"type": "string"}}, "required": ["name"]},
]


def editor(port: int = 0, tools: list[dict[str, Any]] = SCENE_COMMANDS) -> Backend:
    fake = Backend(token=TOKEN, framing=LengthPrefixed(), port=port)
    fake.tools = list(tools)  # published before it listens: a bridge may connect at once
    objects: list[str] = ["Main Camera"]
    fake.handlers["get_hierarchy"] = lambda a: {"objects": list(objects)}

    def create(a: dict[str, Any]) -> dict[str, Any]:
        if a["name"] in objects:
            raise BackendError(-32000, f"{a['name']} exists", {"kind": "locked"})
        objects.append(a["name"])
        return {"created": a["name"]}

    fake.handlers["create_gameobject"] = create
    return fake.start()


@pytest.fixture
def unity() -> Iterator[Backend]:
    fake = editor()
    yield fake
    fake.stop()


def load(monkeypatch: pytest.MonkeyPatch, port: int, **env: str) -> Any:
    monkeypatch.setenv("UNITY_BRIDGE_PORT", str(port))
    monkeypatch.setenv("UNITY_BRIDGE_TOKEN", TOKEN)
    monkeypatch.setenv("UNITY_PROBE_INTERVAL", "0.2")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location(f"unity_example_{next(_modules)}", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def names(listing: dict[str, Any]) -> set[str]:
    return {t["name"] for t in listing["tools"]}


@pytest.mark.asyncio
async def test_the_editors_commands_are_the_servers_tools(monkeypatch: pytest.MonkeyPatch, unity: Backend,
                                                          wire: Any) -> None:
    example = load(monkeypatch, unity.port)
    async with connect(example.server, wire) as h:
        first = asyncio.ensure_future(h.request("tools/list", timeout=30))
        example.unity.start()  # the editor connects after the client asked: the list waits for it
        try:
            listing = await first
            # the destructive command is gated (no MCPKIT_ALLOW_DESTRUCTIVE)
            assert names(listing) == {"get_hierarchy", "create_gameobject"}
            create = next(t for t in listing["tools"] if t["name"] == "create_gameobject")
            assert create["inputSchema"]["required"] == ["name"]
            assert create["annotations"]["readOnlyHint"] is False
            made = await h.request("tools/call", {"name": "create_gameobject", "arguments": {"name": "Player"}})
            assert made["structuredContent"] == {"created": "Player"}
            again = await h.request("tools/call", {"name": "create_gameobject", "arguments": {"name": "Player"}})
            assert again["isError"] is True and again["_meta"]["dev.mcpkit/error"]["code"] == E_PERMISSION_DENIED
            invalid = await h.request("tools/call", {"name": "get_hierarchy", "arguments": {"depth": 0}})
            assert invalid["isError"] is True  # the editor's own schema, enforced here
            tree = await h.request("tools/call", {"name": "get_hierarchy", "arguments": {"depth": 1}})
            assert tree["structuredContent"] == {"objects": ["Main Camera", "Player"]}
        finally:
            example.unity.stop()


@pytest.mark.asyncio
async def test_a_package_adds_commands_at_run_time_with_a_schema_version_bump(
        monkeypatch: pytest.MonkeyPatch, unity: Backend, wire: Any) -> None:
    example = load(monkeypatch, unity.port, MCPKIT_ALLOW_DESTRUCTIVE="1")
    example.unity.start()
    try:
        assert await example.unity.wait_up(20)
        async with connect(example.server, wire) as h:
            assert names(await h.request("tools/list")) == {"get_hierarchy", "create_gameobject", "delete_gameobject"}
            n = len(h.notifications_of(CHANGED))
            unity.tools = [*SCENE_COMMANDS[:2], {"command": "bake_lighting", "summary": "Bake the lightmaps.",
                                                  "args": {"quality": {"enum": ["low", "high"]}}}]
            unity.handlers["bake_lighting"] = lambda a: {"baked": a.get("quality", "low")}
            unity.schema_version = 2  # the plugin bumps its schema version; no notification sent
            await h.wait_notification(CHANGED, n + 1)
            assert names(await h.request("tools/list")) == {"get_hierarchy", "create_gameobject", "bake_lighting"}
            baked = await h.request("tools/call", {"name": "bake_lighting", "arguments": {"quality": "high"}})
            assert baked["structuredContent"] == {"baked": "high"}
            await asyncio.sleep(0.6)  # several probes later: still one notification for the change
            assert len(h.notifications_of(CHANGED)) == n + 1
    finally:
        example.unity.stop()


@pytest.mark.asyncio
async def test_the_editor_closes_and_reopens(monkeypatch: pytest.MonkeyPatch, wire: Any) -> None:
    first = editor()
    port = first.port
    example = load(monkeypatch, port)
    example.unity.start()
    second = None
    try:
        assert await example.unity.wait_up(20)
        async with connect(example.server, wire) as h:
            assert names(await h.request("tools/list")) == {"get_hierarchy", "create_gameobject"}
            n = len(h.notifications_of(CHANGED))
            first.stop()  # Unity closed
            await h.wait_notification(CHANGED, n + 1)
            assert names(await h.request("tools/list")) == set()
            down = await h.request("tools/call", {"name": "get_hierarchy", "arguments": {}})
            assert down["_meta"]["dev.mcpkit/error"]["code"] == E_NOT_CONNECTED
            second = editor(port, SCENE_COMMANDS[:1])  # reopened, with one command fewer
            await h.wait_notification(CHANGED, n + 2, timeout=30)
            assert names(await h.request("tools/list")) == {"get_hierarchy"}
            await asyncio.sleep(0.6)
            assert len(h.notifications_of(CHANGED)) == n + 2  # its return and its new list: one notification
            assert example.mirror.tools == ["get_hierarchy"]
    finally:
        example.unity.stop()
        first.stop()
        if second is not None:
            second.stop()


@pytest.mark.asyncio
async def test_assets_paths_are_confined_to_the_project(monkeypatch: pytest.MonkeyPatch, unity: Backend,
                                                        tmp_path: Path, wire: Any) -> None:
    root = tmp_path / "Game"
    (root / "Assets" / "Scripts").mkdir(parents=True)
    (root / "Assets" / "Scripts" / "Player.cs").write_text("public class Player {}\n")
    (tmp_path / "secret.txt").write_text("s3cret")
    example = load(monkeypatch, unity.port, UNITY_PROJECT=str(root))
    async with connect(example.server, wire) as h:
        read = await h.request("tools/call", {"name": "read_asset", "arguments": {"path": "Assets/Scripts/Player.cs"}})
        assert read["content"][0]["text"] == "public class Player {}\n"
        escape = await h.request("tools/call", {"name": "read_asset", "arguments": {"path": "Assets/../../secret.txt"}})
        assert escape["_meta"]["dev.mcpkit/error"]["code"] == E_PERMISSION_DENIED
        missing = await h.request("tools/call", {"name": "read_asset", "arguments": {"path": "Assets/none.cs"}})
        assert missing["_meta"]["dev.mcpkit/error"]["code"] == E_NOT_FOUND


@pytest.mark.asyncio
async def test_the_mirrored_tools_pass_every_default_host_and_openai_strict_with_host_schemas(
        monkeypatch: pytest.MonkeyPatch, unity: Backend, wire: Any) -> None:
    from mcpkit.hosts import DEFAULT_HOSTS
    from tests.check.test_hosts import _host_findings

    example = load(monkeypatch, unity.port, MCPKIT_ALLOW_DESTRUCTIVE="1")
    example.unity.start()
    try:
        async with connect(example.server, wire) as h:
            listing = await h.request("tools/list", timeout=30)  # the editor's commands are mirrored
        assert {"get_hierarchy", "create_gameobject"} <= {t["name"] for t in listing["tools"]}
        assert await _host_findings(example.server, set(DEFAULT_HOSTS)) == []
        example.server.host_schemas = "openai-strict"
        assert await _host_findings(example.server, {"openai-strict"}) == []
    finally:
        example.unity.stop()
