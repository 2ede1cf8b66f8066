"""examples/unity_plugin_bridge.py against a fake Unity plugin that speaks its own protocol
(tests/examples/unity_plugin.py): commands mirrored as tools, its errors mapped, its event
re-reading the list, a crash mid-call, the editor closing and reopening, and `mcpkit check`."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.protocol.errors import E_NOT_CONNECTED, E_NOT_FOUND, E_PERMISSION_DENIED
from tests.harness import connect

from .unity_plugin import COMMANDS, TOKEN, UnityPlugin

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "unity_plugin_bridge.py"
CHANGED = "notifications/tools/list_changed"
_modules = itertools.count()


@pytest.fixture
def unity() -> Iterator[UnityPlugin]:
    plugin = UnityPlugin().start()
    yield plugin
    plugin.stop()


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    loaded: list[Any] = []

    def load(port: int, **env: str) -> Any:
        for key, value in {"UNITY_PLUGIN_PORT": str(port), "UNITY_PLUGIN_TOKEN": TOKEN,
                           "UNITY_PROBE_INTERVAL": "0.2", **env}.items():
            monkeypatch.setenv(key, value)
        spec = importlib.util.spec_from_file_location(f"unity_plugin_example_{next(_modules)}", EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # starts the bridge, as `mcpkit serve` does
        loaded.append(module)
        return module

    yield load
    for module in loaded:
        module.unity.stop()


def names(listing: dict[str, Any]) -> set[str]:
    return {t["name"] for t in listing["tools"]}


def code(result: dict[str, Any]) -> str:
    assert result["isError"] is True, result
    return result["_meta"]["dev.mcpkit/error"]["code"]  # type: ignore[no-any-return]


@pytest.mark.asyncio
async def test_the_plugins_commands_are_the_servers_tools(unity: UnityPlugin, load: Any, wire: Any) -> None:
    example = load(unity.port)
    async with connect(example.server, wire) as h:
        listing = await h.request("tools/list", timeout=30)  # waits for the first sync
        assert names(listing) == {"get_hierarchy", "create_gameobject", "bake_lighting"}  # delete: gated
        create = next(t for t in listing["tools"] if t["name"] == "create_gameobject")
        assert create["inputSchema"]["required"] == ["name"] and create["annotations"]["readOnlyHint"] is False
        made = await h.request("tools/call", {"name": "create_gameobject", "arguments": {"name": "Player"}})
        assert made["structuredContent"] == {"created": "Player"}
        again = await h.request("tools/call", {"name": "create_gameobject", "arguments": {"name": "Player"}})
        assert code(again) == E_PERMISSION_DENIED
        assert "a GameObject named Player exists" in again["content"][0]["text"]
        invalid = await h.request("tools/call", {"name": "get_hierarchy", "arguments": {"depth": 0}})
        assert invalid["isError"] is True  # the plugin's own schema, enforced before it is asked
        tree = await h.request("tools/call", {"name": "get_hierarchy", "arguments": {"depth": 1}})
        assert tree["structuredContent"] == {"objects": ["Main Camera", "Player"]}
    first = unity.received[0]
    assert first["command"] == "authenticate" and first["parameters"]["token"] == TOKEN
    call = next(m for m in unity.received if m["command"] == "create_gameobject")
    assert call == {"type": "request", "id": call["id"], "command": "create_gameobject",
                    "parameters": {"name": "Player"}}


@pytest.mark.asyncio
async def test_errors_map_by_the_plugins_codes(unity: UnityPlugin, load: Any, wire: Any) -> None:
    example = load(unity.port, MCPKIT_ALLOW_DESTRUCTIVE="1")
    assert await example.unity.wait_up(20), example.unity.last_error
    async with connect(example.server, wire) as h:
        assert "delete_gameobject" in names(await h.request("tools/list"))
        missing = await h.request("tools/call", {"name": "delete_gameobject", "arguments": {"name": "Ghost"}})
        assert code(missing) == E_NOT_FOUND and "no GameObject named Ghost" in missing["content"][0]["text"]


@pytest.mark.asyncio
async def test_the_plugins_event_re_reads_its_commands(unity: UnityPlugin, load: Any, wire: Any) -> None:
    example = load(unity.port)
    assert await example.unity.wait_up(20), example.unity.last_error
    async with connect(example.server, wire) as h:
        assert names(await h.request("tools/list")) == {"get_hierarchy", "create_gameobject", "bake_lighting"}
        n = len(h.notifications_of(CHANGED))
        unity.commands = [*COMMANDS[:2], {"name": "play_mode", "description": "Enter or leave play mode.",
                                          "parameters": {"type": "object",
                                                         "properties": {"on": {"type": "boolean"}}}}]
        unity.commands_changed()
        await h.wait_notification(CHANGED, n + 1)
        assert names(await h.request("tools/list")) == {"get_hierarchy", "create_gameobject", "play_mode"}


@pytest.mark.asyncio
async def test_the_editor_crashes_mid_call_and_reopens(load: Any, wire: Any) -> None:
    first = UnityPlugin().start()
    second = None
    try:
        example = load(first.port)
        assert await example.unity.wait_up(20), example.unity.last_error
        first.crash_on_bake = True
        async with connect(example.server, wire) as h:
            assert "bake_lighting" in names(await h.request("tools/list"))
            n = len(h.notifications_of(CHANGED))
            baking = asyncio.ensure_future(
                h.request("tools/call", {"name": "bake_lighting", "arguments": {"quality": "high"}}, timeout=15))
            assert await asyncio.to_thread(first.baking.wait, 10)
            first.stop()  # and the editor stays closed
            crashed = await baking  # within 15 s, not the tool's 60 s timeout
            assert code(crashed) == E_NOT_CONNECTED
            assert crashed["_meta"]["dev.mcpkit/error"]["retryable"] is True
            await h.wait_notification(CHANGED, n + 1)
            assert names(await h.request("tools/list")) == set()  # hidden while the editor is closed
            second = UnityPlugin(first.port, COMMANDS[:1]).start()  # reopened, with one command
            await h.wait_notification(CHANGED, n + 2, timeout=30)
            assert names(await h.request("tools/list")) == {"get_hierarchy"}
            tree = await h.request("tools/call", {"name": "get_hierarchy", "arguments": {}})
            assert tree["structuredContent"] == {"objects": ["Main Camera"]}
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_mcpkit_check_passes_for_claude_openai_and_gemini(unity: UnityPlugin) -> None:
    """The example served as users serve it, judged by `mcpkit check` with the host rules."""
    env = {**os.environ, "UNITY_PLUGIN_PORT": str(unity.port), "UNITY_PLUGIN_TOKEN": TOKEN}
    run = subprocess.run(
        [sys.executable, "-m", "mcpkit", "check", "--hosts", "claude,openai,gemini", "--fail-on", "warning",
         "--call-tools", "--pass-env", "UNITY_PLUGIN_PORT", "--pass-env", "UNITY_PLUGIN_TOKEN", "--pass-env", "PYTHONPATH",
         "--no-color", str(EXAMPLE)],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 failed" in run.stdout and "tools called: get_hierarchy" in run.stdout, run.stdout
    for host in ("Claude", "OpenAI", "Google Gemini"):  # the plugin's three ungated commands, judged
        assert f"3 tool(s) acceptable to {host}" in run.stdout, run.stdout
    assert any(m.get("command") == "get_hierarchy" for m in unity.received)  # the read-only one, called


@pytest.mark.asyncio
async def test_the_mirrored_tools_pass_every_default_host_and_openai_strict_with_host_schemas(
        unity: UnityPlugin, load: Any, wire: Any) -> None:
    from mcpkit.hosts import DEFAULT_HOSTS
    from tests.check.test_hosts import _host_findings

    example = load(unity.port, MCPKIT_ALLOW_DESTRUCTIVE="1")
    async with connect(example.server, wire) as h:
        listing = await h.request("tools/list", timeout=30)  # the plugin's commands are mirrored
    assert len(listing["tools"]) == len(COMMANDS)
    assert await _host_findings(example.server, set(DEFAULT_HOSTS)) == []
    example.server.host_schemas = "openai-strict"
    assert await _host_findings(example.server, {"openai-strict"}) == []
