"""A godot-omni-style manager tool as hosts see it: one flat schema every host takes, and strict
per-action validation behind it; per-action bridges, timeouts and rate limits."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any, Literal

import jsonschema
import pytest

from mcpkit import HostCompatibilityWarning, Server, ToolError
from mcpkit.hosts import ROOT_COMBINATORS, flatten, tool_problems
from mcpkit.policy import Gates, Policy
from tests.harness import connect
from tests.policy.test_chain import LATEST_HANDSHAKE, MemoryAudit, call, error_of


def godot(schema: str = "flat", **policy: Any) -> tuple[Server, list[str]]:
    """Several actions with mutually exclusive parameters, as in the godot-mcp-omni contract."""
    server = Server("godot", policy=Policy(gates=Gates(allow_destructive=True), contract=True,
                                           audit=MemoryAudit(), **policy))
    ran: list[str] = []
    scene = server.manager("scene", description="Edit the open Godot scene.", schema=schema)

    @scene.action(read_only=True, open_world=False)
    def inspect(node_path: str = ".") -> dict[str, Any]:
        """Describe a node and its children."""
        ran.append(f"inspect {node_path}")
        return {"path": node_path, "children": []}

    @scene.action(destructive=False, open_world=False)
    def add_node(parent_path: str, node_type: Literal["Node2D", "Sprite2D", "Camera2D"], name: str) -> str:
        """Add a child node.

        Args:
            parent_path: Where to add it.
            node_type: The Godot class to instantiate.
            name: The new node's name.
        """
        ran.append(f"add {parent_path}/{name}")
        return f"{parent_path}/{name}"

    @scene.action(destructive=False, open_world=False)
    def set_property(node_path: str, property: str, value: float | str | bool) -> None:
        """Set one property of a node."""
        ran.append(f"set {node_path}.{property}")

    @scene.action(destructive=True, open_world=False)
    def remove_node(node_path: str, keep_children: bool = False) -> None:
        """Remove a node."""
        ran.append(f"remove {node_path}")

    return server, ran


async def listed(server: Server, wire: Any) -> dict[str, Any]:
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        (tool,) = (await c.request("tools/list", {}))["tools"]
    return tool


@pytest.mark.req("TL-05")
@pytest.mark.asyncio
async def test_the_advertised_schema_is_one_flat_object_every_host_accepts(wire):
    server, _ = godot()
    tool = await listed(server, wire)
    schema = tool["inputSchema"]
    assert not [k for k in ROOT_COMBINATORS if k in schema]
    assert schema["type"] == "object" and schema["required"] == ["action"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["action"]["enum"] == ["inspect", "add_node", "set_property", "remove_node"]
    assert set(props) == {"action", "node_path", "parent_path", "node_type", "name", "property", "value",
                          "keep_children"}
    # each property names the actions it belongs to, and which of them require it
    # one string, whichever action: the default only inspect has is told, not made a second schema
    assert props["node_path"] == {"type": "string", "description": (
        'Default for inspect: ".". '
        "Used by actions: inspect, set_property, remove_node (required by set_property, remove_node).")}
    assert props["parent_path"]["description"] == "Where to add it. Used by action: add_node (required by add_node)."
    assert props["node_type"]["enum"] == ["Node2D", "Sprite2D", "Camera2D"]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert tool_problems(tool, ["claude", "openai", "gemini", "bedrock", "vertex"]) == []


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_each_call_is_held_to_its_own_actions_closed_branch(wire):
    server, ran = godot()
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        ok = await call(c, "scene", {"action": "add_node", "parent_path": "/root", "node_type": "Sprite2D",
                                     "name": "Hero"})
        # valid against the flat union, but node_type belongs to add_node, not set_property
        foreign = await call(c, "scene", {"action": "set_property", "node_path": "/root/Hero", "property": "x",
                                          "value": 3, "node_type": "Node2D"})
        missing = await call(c, "scene", {"action": "add_node", "parent_path": "/root", "name": "Hero"})
        wrong_type = await call(c, "scene", {"action": "add_node", "parent_path": "/root", "node_type": "Label",
                                             "name": "x"})
        no_action = await call(c, "scene", {"node_path": "/root"})
        defaults = await call(c, "scene", {"action": "inspect"})
    assert ok["structuredContent"]["result"] == "/root/Hero"
    assert defaults["structuredContent"]["result"] == {"path": ".", "children": []}
    assert ran == ["add /root/Hero", "inspect ."]
    for bad in (foreign, missing, wrong_type, no_action):
        assert bad["isError"] is True and error_of(bad)["code"] == "E_SCHEMA_VALIDATION"
    assert "action 'set_property' does not take 'node_type' (it is a parameter of 'add_node')" in \
        error_of(foreign)["message"]
    assert error_of(foreign)["details"]["errors"][0]["path"] == "/node_type"
    assert "action 'add_node' requires 'node_type'" in error_of(missing)["message"]
    assert "action 'add_node': " in error_of(wrong_type)["message"] and "Label" in error_of(wrong_type)["message"]
    assert "'action' is required" in error_of(no_action)["message"]


@pytest.mark.asyncio
async def test_the_closed_oneof_form_is_an_option_with_the_same_strict_validation(wire):
    server, ran = godot(schema="oneOf")
    tool = await listed(server, wire)
    assert [b["properties"]["action"] for b in tool["inputSchema"]["oneOf"]] == [
        {"const": "inspect"}, {"const": "add_node"}, {"const": "set_property"}, {"const": "remove_node"}]
    # the table says who refuses it, so the choice is an informed one
    assert {p.host for p in tool_problems(tool, ["claude", "openai", "gemini"])} == {"claude", "openai", "gemini"}
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        bad = await call(c, "scene", {"action": "remove_node", "node_path": "/a", "name": "b"})
    assert "action 'remove_node' does not take 'name'" in error_of(bad)["message"]
    with pytest.raises(ValueError, match="schema must be one of"):
        Server("x").manager("m", schema="anyOf")


class FakeBridge:
    """What ToolOptions needs of a Bridge: up, on_change, not_connected_error."""

    def __init__(self, up: bool) -> None:
        self.up = up
        self._callbacks: list[Callable[[bool], None]] = []

    def on_change(self, callback: Callable[[bool], None]) -> None:
        self._callbacks.append(callback)

    def set(self, up: bool) -> None:
        self.up = up
        for cb in self._callbacks:
            cb(up)

    def not_connected_error(self) -> ToolError:
        return ToolError("editor is not connected", code="E_NOT_CONNECTED")


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_actions_take_their_own_bridge_timeout_and_rate_limit(wire):
    editor = FakeBridge(up=False)
    server = Server("g", policy=Policy(gates=Gates(), contract=True, audit=MemoryAudit()))
    tool = server.manager("editor")

    @tool.action(read_only=True, open_world=False, rate_limit="2/min")
    def status() -> str:
        return "idle"

    @tool.action(destructive=False, open_world=False, requires=editor)
    def run_scene() -> str:
        return "running"

    @tool.action(read_only=True, open_world=False, timeout=0.2)
    async def wait() -> str:
        await asyncio.sleep(5)
        return "late"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        (listed_tool,) = (await c.request("tools/list", {}))["tools"]
        assert listed_tool["inputSchema"]["properties"]["action"]["enum"] == ["status", "wait"]
        down = await call(c, "editor", {"action": "run_scene"})
        editor.set(True)
        (listed_tool,) = (await c.request("tools/list", {}))["tools"]
        assert listed_tool["inputSchema"]["properties"]["action"]["enum"] == ["status", "run_scene", "wait"]
        up = await call(c, "editor", {"action": "run_scene"})
        limited = [await call(c, "editor", {"action": "status"}) for _ in range(3)]
        slow = await call(c, "editor", {"action": "wait"})
    # not offered while its bridge is down, and a call by name says why (retryable)
    assert error_of(down)["code"] == "E_NOT_CONNECTED" and error_of(down)["retryable"] is True
    assert up["structuredContent"]["result"] == "running"
    assert [r.get("isError", False) for r in limited] == [False, False, True]
    assert error_of(limited[2])["code"] == "E_RATE_LIMITED"
    assert error_of(slow)["code"] == "E_TIMEOUT" and "0.2 s" in error_of(slow)["message"]


def test_a_raw_root_combinator_warns_naming_the_hosts_and_flatten_lists_a_flat_copy():
    schema = {
        "type": "object",
        "oneOf": [
            {"properties": {"id": {"type": "string", "description": "The id."}}, "required": ["id"]},
            {"properties": {"full_path": {"type": "string"}}, "required": ["full_path"]},
        ],
    }
    server = Server("raw")
    with pytest.warns(HostCompatibilityWarning, match="oneOf at its root.*Anthropic API.*OpenAI.*Gemini"):
        server.add_tool("lookup", lambda args: "ok", input_schema=schema)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tool = server.add_tool("lookup2", lambda args: "ok", input_schema=schema, flatten=True,
                               read_only=True, open_world=False)
    advertised = tool.describe()
    assert "oneOf" not in advertised["inputSchema"]
    assert advertised["inputSchema"]["properties"]["id"]["description"] == "The id. Used by: oneOf[0]."
    assert advertised["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert tool_problems(advertised, ["claude", "openai", "gemini"]) == []
    # calls are still held to the original: exactly one of id / full_path
    assert tool.check_arguments({"id": "a"})[1] is None
    assert tool.check_arguments({"id": "a", "full_path": "b"})[1] is not None
    assert tool.check_arguments({})[1] is not None


def test_flatten_keeps_a_plain_schema_and_refuses_what_it_cannot_express():
    plain = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert flatten(plain) == plain
    with pytest.raises(ValueError, match="root 'not'"):
        flatten({"type": "object", "not": {"required": ["a"]}})
    both = flatten({"type": "object", "anyOf": [
        {"properties": {"x": {"type": "integer"}}, "required": ["x", "y"]},
        {"properties": {"y": {"type": "integer"}}, "required": ["y"]},
    ]})
    assert both["required"] == ["y"]  # what every branch requires stays required


@pytest.mark.req("TL-05")
@pytest.mark.asyncio
async def test_a_parameter_described_differently_per_action_is_described_per_action(wire):
    # "path" is a directory to list and a file to read: the flat schema must not tell the model
    # the first action's meaning for both, nor split one string into an anyOf by its default
    server = Server("files")
    files = server.manager("files", description="Project files.")

    @files.action(read_only=True, open_world=False)
    def listing(path: str = ".", depth: int = 1) -> list[str]:
        """List a directory.

        Args:
            path: The directory, relative to the root.
            depth: How deep to go.
        """
        return []

    @files.action(read_only=True, open_world=False)
    def read(path: str, depth: int = 1) -> str:
        """Read a file.

        Args:
            path: The file, relative to the root.
            depth: How deep to go.
        """
        return ""

    tool = await listed(server, wire)
    props = tool["inputSchema"]["properties"]
    assert props["path"] == {"type": "string", "description": (
        "listing: The directory, relative to the root; read: The file, relative to the root. "
        'Default for listing: ".". Used by actions: listing, read (required by read).')}
    # what every action says alike stays as it was, default included
    assert props["depth"] == {"type": "integer", "default": 1,
                              "description": "How deep to go. Used by actions: listing, read."}
    assert props["action"]["description"] == "What to do: listing: List a directory; read: Read a file."
