"""Parameters declared exclusive or dependent (``@server.tool(exclusive=..., depends_on=...)``):
advertised in words hosts accept, enforced on every call by the one validation path."""

from __future__ import annotations

import pytest

from mcpkit import Server
from mcpkit.hosts import DEFAULT_HOSTS, tool_problems
from mcpkit.policy import Policy
from tests.harness import RpcError, connect


def relating(policy: Policy | None = None) -> tuple[Server, list]:
    server = Server("t", policy=policy)
    ran: list = []

    @server.tool(exclusive=[("path", "uid")], depends_on={"width": "height"}, read_only=True, open_world=False)
    def resize(path: str | None = None, uid: str | None = None, width: int | None = None,
               height: int | None = None) -> str:
        """Resize a node."""
        ran.append((path, uid, width, height))
        return "done"

    return server, ran


async def call(h, arguments: dict) -> dict:
    return await h.request("tools/call", {"name": "resize", "arguments": arguments})


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
@pytest.mark.parametrize("policy", [None, Policy(contract=True)], ids=["plain", "policy"])
async def test_exclusive_and_dependent_parameters_are_refused_naming_both(wire, policy):
    server, ran = relating(policy)
    async with connect(server, wire, "2025-11-25") as h:
        both = await call(h, {"path": "res://a.tscn", "uid": "uid://x"})
        assert both["isError"] is True
        assert "path and uid are mutually exclusive" in both["content"][0]["text"]
        alone = await call(h, {"width": 3})
        assert alone["isError"] is True
        assert "width requires height" in alone["content"][0]["text"]
        # null is a parameter left out (strict hosts send it): not a second one
        assert not (await call(h, {"path": "res://a.tscn", "uid": None})).get("isError")
        assert not (await call(h, {"uid": "uid://x", "width": 3, "height": 4})).get("isError")
        assert not (await call(h, {"height": 4})).get("isError")  # depends_on goes one way
    assert ran == [("res://a.tscn", None, None, None), (None, "uid://x", 3, 4), (None, None, None, 4)]


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
async def test_before_2025_11_25_a_broken_relation_is_invalid_params_with_the_errors(wire):
    server, ran = relating()
    async with connect(server, wire, "2025-06-18") as h:
        with pytest.raises(RpcError) as err:
            await call(h, {"path": "a", "uid": "b", "width": 1})
    assert err.value.code == -32602
    assert err.value.data == {"errors": [
        {"path": "/uid", "message": "path and uid are mutually exclusive: give only one of path or uid"},
        {"path": "/width", "message": "width requires height: give it too, or leave width out"}]}
    assert ran == []


@pytest.mark.asyncio
async def test_the_relations_are_advertised_in_words_every_default_host_accepts(wire):
    server, _ = relating()
    async with connect(server, wire, "2025-11-25") as h:
        (tool,) = (await h.request("tools/list", {}))["tools"]
    schema = tool["inputSchema"]
    assert not {"oneOf", "anyOf", "allOf", "not", "dependentRequired", "dependencies"} & set(schema)
    assert tool["description"] == "Resize a node. Give at most one of path or uid. width requires height."
    assert schema["properties"]["path"]["description"] == "Not with uid."
    assert schema["properties"]["width"]["description"] == "Requires height."
    assert tool_problems(tool, DEFAULT_HOSTS) == []


@pytest.mark.asyncio
async def test_a_raw_tool_keeps_its_schema_and_is_held_to_the_relation(wire):
    server = Server("t")
    schema = {"type": "object", "properties": {"path": {"type": "string"}, "uid": {"type": "string"}}}
    server.add_tool("pick", lambda args: "ok", input_schema=schema, description="Pick.", exclusive=[("path", "uid")])
    async with connect(server, wire, "2025-11-25") as h:
        (tool,) = (await h.request("tools/list", {}))["tools"]
        refused = await h.request("tools/call", {"name": "pick", "arguments": {"path": "a", "uid": "b"}})
    assert tool["inputSchema"] == schema
    assert tool["description"] == "Pick. Give at most one of path or uid."
    assert refused["isError"] is True and "path and uid are mutually exclusive" in refused["content"][0]["text"]


def test_a_relation_no_call_could_meet_is_refused_at_registration():
    server = Server("t")
    with pytest.raises(ValueError, match="unknown parameter"):
        server.tool(lambda a=None: a, name="x", exclusive=[("a", "b")])
    with pytest.raises(ValueError, match="a and b are required and exclusive"):
        @server.tool(exclusive=[("a", "b")])
        def y(a: int, b: int) -> int:
            return a
    with pytest.raises(ValueError, match="two or more"):
        server.tool(lambda a=None: a, name="z", exclusive=["a"])


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
async def test_a_manager_action_declares_its_own_relations(wire):
    server = Server("t", policy=Policy(contract="legacy"))
    scene = server.manager("scene", description="Scenes.")

    @scene.action(read_only=True, open_world=False, exclusive=[("path", "uid")])
    def tree(path: str | None = None, uid: str | None = None) -> dict:
        """The node tree of a scene."""
        return {"scene": path or uid}

    @scene.action(read_only=True, open_world=False)
    def info(path: str | None = None, uid: str | None = None) -> dict:
        """What a scene is; path and uid together are fine here."""
        return {"both": [path, uid]}

    async with connect(server, wire, "2025-11-25") as h:
        (tool,) = (await h.request("tools/list", {}))["tools"]
        refused = await h.request("tools/call", {"name": "scene", "arguments": {"action": "tree", "path": "a",
                                                                                "uid": "b"}})
        fine = await h.request("tools/call", {"name": "scene", "arguments": {"action": "info", "path": "a",
                                                                             "uid": "b"}})
    assert "tree: The node tree of a scene. Give at most one of path or uid" in \
        tool["inputSchema"]["properties"]["action"]["description"]
    assert "Not with uid." in tool["inputSchema"]["properties"]["path"]["description"]
    assert tool_problems(tool, DEFAULT_HOSTS) == []
    env = refused["structuredContent"]
    assert refused["isError"] is True and env["error"]["code"] == "E_SCHEMA_VALIDATION"
    assert "action 'tree': path and uid are mutually exclusive" in env["error"]["message"]
    assert env["errors"] == [env["error"]["message"]]  # the legacy shape, on a refused action too
    assert fine["structuredContent"]["result"] == {"both": ["a", "b"]}
