"""Bridges required per action (``@tool.action(requires=bridge)``) behave as one required by the
whole manager: a call while they are down is a retryable E_NOT_CONNECTED, and each transition of
a bridge is one ``tools/list_changed``, however many actions, managers or copies need it (TL-13)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Server
from mcpkit.policy import Bridge, Gates, Policy
from tests.harness import connect
from tests.policy.test_bridge import Clock, Peer
from tests.policy.test_chain import LATEST_HANDSHAKE, MemoryAudit, call, error_of, names

CHANGED = "notifications/tools/list_changed"


def editor_bridge(name: str = "editor") -> tuple[Bridge, Peer, Clock]:
    clock, peer = Clock(), Peer()
    bridge = Bridge(name, peer.connect, probe=peer.probe, close=peer.close, probe_interval=1.0,
                    backoff_initial=0.5, jitter=0.0, clock=clock)
    return bridge, peer, clock


def go_down(bridge: Bridge, peer: Peer, clock: Clock) -> None:
    peer.reachable = peer.healthy = False
    clock.t += 1.0
    bridge.step()  # the probe fails
    assert not bridge.up


def come_up(bridge: Bridge, peer: Peer, clock: Clock) -> None:
    peer.reachable = peer.healthy = True
    clock.t += 5.0
    bridge.step()
    assert bridge.up


def scene_manager(server: Server, bridge: Any, name: str = "scene") -> Any:
    """Four actions, each needing the editor, as in the seed servers' editor tools."""
    tool = server.manager(name, description="Edit the open scene.")

    @tool.action(read_only=True, open_world=False, requires=bridge)
    def inspect(node_path: str = ".") -> str:
        return f"inspected {node_path}"

    @tool.action(destructive=False, open_world=False, requires=bridge)
    def add_node(parent_path: str, name: str) -> str:
        return f"{parent_path}/{name}"

    @tool.action(destructive=False, open_world=False, requires=bridge)
    def rename_node(node_path: str, name: str) -> str:
        return name

    @tool.action(destructive=False, open_world=False, requires=bridge)
    def save() -> str:
        return "saved"

    return tool


async def changes_so_far(c: Any) -> int:
    """The list_changed notifications received so far: an answered ping follows every
    notification queued before it, so none is still on its way."""
    await c.request("ping", {})
    return len(c.notifications_of(CHANGED))


def assert_not_connected(result: dict[str, Any], bridge: str = "editor") -> None:
    error = error_of(result)
    assert error["code"] == "E_NOT_CONNECTED", error
    assert error["retryable"] is True
    assert error["details"]["bridge"] == bridge and error["details"]["retryAfterMs"] >= 1


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
@pytest.mark.parametrize("arguments", [{"action": "add_node", "parent_path": ".", "name": "n"}, {"action": "nope"}, {}])
async def test_a_manager_whose_every_action_needs_a_down_bridge_refuses_as_not_connected(wire, arguments):
    editor, _, _ = editor_bridge()  # never connected: what a wrong token looks like too
    server = Server("godot", policy=Policy(gates=Gates(), audit=MemoryAudit()))
    scene_manager(server, editor)
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert await names(c) == []
        # retryable with retryAfterMs, as requires= on the whole manager answers; never a
        # permission refusal, which tells the agent to stop trying
        assert_not_connected(await call(c, "scene", arguments))


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_a_flapping_bridge_of_four_actions_is_one_list_changed_per_transition(wire):
    editor, peer, clock = editor_bridge()
    server = Server("godot", policy=Policy(gates=Gates(), audit=MemoryAudit()))
    scene_manager(server, editor)
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert await names(c) == [] and await changes_so_far(c) == 0
        editor.step()  # up
        assert await changes_so_far(c) == 1
        assert await names(c) == ["scene"]
        assert (await call(c, "scene", {"action": "save"}))["content"][0]["text"] == "saved"
        for n in range(3):  # down, up, down, up, down, up
            go_down(editor, peer, clock)
            assert await changes_so_far(c) == 2 + 2 * n
            assert await names(c) == []
            assert_not_connected(await call(c, "scene", {"action": "save"}))
            come_up(editor, peer, clock)
            assert await changes_so_far(c) == 3 + 2 * n
            (listed,) = (await c.request("tools/list", {}))["tools"]
            assert listed["inputSchema"]["properties"]["action"]["enum"] == ["inspect", "add_node", "rename_node",
                                                                              "save"]


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_a_bridge_shared_by_two_managers_and_a_tool_is_one_list_changed_per_transition(wire):
    editor, peer, clock = editor_bridge()
    server = Server("godot", policy=Policy(gates=Gates(), audit=MemoryAudit()))
    scene_manager(server, editor, "scene")
    scene_manager(server, editor, "prefab")
    whole = server.manager("engine", requires=editor)

    @whole.action(read_only=True, open_world=False)
    def version() -> str:
        return "3.5"

    @server.tool(read_only=True, open_world=False, requires=editor)
    def ping_editor() -> str:
        return "pong"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        editor.step()
        assert await changes_so_far(c) == 1
        assert await names(c) == ["scene", "prefab", "engine", "ping_editor"]
        go_down(editor, peer, clock)
        assert await changes_so_far(c) == 2
        assert await names(c) == []
        for tool, arguments in (("scene", {"action": "save"}), ("prefab", {"action": "save"}),
                                ("engine", {"action": "version"}), ("ping_editor", {})):
            assert_not_connected(await call(c, tool, arguments))


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_an_action_gated_off_is_refused_as_permission_while_its_bridge_is_down(wire):
    editor, _, _ = editor_bridge()
    server = Server("godot", policy=Policy(gates=Gates(read_only=True), audit=MemoryAudit()))
    scene_manager(server, editor)
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        # the bridge being down does not hide that the gate refuses this action for good
        refused = error_of(await call(c, "scene", {"action": "save"}))
        assert refused["code"] == "E_PERMISSION_DENIED" and refused["retryable"] is False
        assert_not_connected(await call(c, "scene", {"action": "inspect"}))


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_an_included_manager_follows_its_action_bridges_in_the_parent(wire):
    editor, peer, clock = editor_bridge()
    child = Server("child")
    scene_manager(child, editor)
    parent = Server("parent", policy=Policy(gates=Gates(), audit=MemoryAudit()))
    parent.include(child, prefix="godot")
    async with connect(parent, wire, LATEST_HANDSHAKE) as c:
        assert await names(c) == []
        editor.step()
        assert await changes_so_far(c) == 1
        assert await names(c) == ["godot_scene"]
        assert (await call(c, "godot_scene", {"action": "save"}))["content"][0]["text"] == "saved"
        go_down(editor, peer, clock)
        assert await changes_so_far(c) == 2
        assert await names(c) == []
        assert_not_connected(await call(c, "godot_scene", {"action": "save"}))


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
@pytest.mark.parametrize("per_action", [False, True])
async def test_a_mounted_server_hides_and_restores_what_needs_its_bridge(wire, per_action):
    editor, peer, clock = editor_bridge()
    child = Server("child", policy=Policy(gates=Gates(), audit=MemoryAudit()))
    if per_action:
        scene_manager(child, editor)
    else:
        @child.tool(read_only=True, open_world=False, requires=editor)
        def scene() -> str:
            return "saved"
    parent = Server("parent")
    parent.mount(child, prefix="godot")
    arguments = {"action": "save"} if per_action else {}
    async with connect(parent, wire, LATEST_HANDSHAKE) as c:
        assert await names(c) == []
        editor.step()
        await c.wait_notification(CHANGED, 1)
        assert await names(c) == ["godot_scene"]
        assert (await call(c, "godot_scene", arguments))["content"][0]["text"] == "saved"
        go_down(editor, peer, clock)
        await c.wait_notification(CHANGED, 2)
        assert await names(c) == []


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_actions_of_an_editor_whose_token_is_refused_say_why_and_stay_retryable(wire):
    from mcpkit.bridge import RpcBridge, Tcp
    from tests.bridge.backend import Backend

    backend = Backend().start()
    editor = RpcBridge("editor", Tcp("127.0.0.1", backend.port), token="wrong", probe_interval=0.2,
                       backoff_initial=0.05, backoff_max=0.2)
    server = Server("godot", policy=Policy(gates=Gates(), audit=MemoryAudit()))
    scene_manager(server, editor)
    editor.start()
    try:
        async with connect(server, wire, LATEST_HANDSHAKE) as c:
            await c.eventually(lambda: editor.last_error is not None)
            assert await names(c) == []
            result = await call(c, "scene", {"action": "save"})
            assert_not_connected(result)
            assert "bad token" in error_of(result)["details"]["lastError"]
    finally:
        editor.stop()
        backend.stop()
