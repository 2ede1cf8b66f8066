"""server.mirror(bridge): the backend's resource templates are the server's templates, readable
and completed by the backend; legacy draft-3 ``"required": true`` becomes a ``required`` list."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.bridge.mirror import adapt_legacy
from tests.harness import RpcError, connect

from .backend import Backend
from .test_mirror import mirrored

LOGS = "unity://logs/{count}"
RESOURCES_CHANGED = "notifications/resources/list_changed"


@pytest.fixture
def backend() -> Iterator[Backend]:
    peer = Backend().start()
    peer.resources = [{"uri": "unity://scene/active", "name": "active scene"}]
    peer.handlers["resources/read"] = lambda p: {"contents": [{"uri": p["uri"], "mimeType": "text/plain",
                                                               "text": f"read {p['uri']}"}]}
    yield peer
    peer.stop()


def complete(count: str) -> dict[str, Any]:
    return {"ref": {"type": "ref/resource", "uri": LOGS}, "argument": {"name": "count", "value": count}}


def reads(peer: Backend) -> list[str]:
    return [m["params"]["uri"] for m in peer.received if m.get("method") == "resources/read"]


@pytest.mark.req("RS-03")
@pytest.mark.asyncio
async def test_a_backends_template_is_listed_read_and_completed_as_a_template(backend: Backend, wire: Any) -> None:
    backend.templates = [{"uriTemplate": LOGS, "name": "console log", "description": "The last count lines.",
                          "mimeType": "text/plain"}]
    backend.handlers["completion/complete"] = lambda p: {"completion": {
        "values": [v for v in ("10", "20", "200") if v.startswith(p["argument"]["value"])], "hasMore": False}}
    server = Server("unity")
    async with mirrored(server, backend), connect(server, wire) as h:
        (template,) = (await h.request("resources/templates/list"))["resourceTemplates"]
        assert template == {"uriTemplate": LOGS, "name": "console log", "description": "The last count lines.",
                            "mimeType": "text/plain"}
        assert [r["uri"] for r in (await h.request("resources/list"))["resources"]] == ["unity://scene/active"]
        read = await h.request("resources/read", {"uri": "unity://logs/20"})
        assert read["contents"] == [{"uri": "unity://logs/20", "mimeType": "text/plain",
                                     "text": "read unity://logs/20"}]
        assert reads(backend) == ["unity://logs/20"]  # the backend is asked for the concrete URI
        completion = (await h.request("completion/complete", complete("2")))["completion"]
        assert completion["values"] == ["20", "200"]


@pytest.mark.asyncio
async def test_a_template_an_older_plugin_lists_among_its_resources_is_a_template(backend: Backend, wire: Any) -> None:
    # no resources/templates/list at all (-32601), and the template in resources/list, braces included
    backend.resources = [*backend.resources, {"uri": LOGS, "name": "console log"}]
    server = Server("unity")
    async with mirrored(server, backend), connect(server, wire) as h:
        templates = (await h.request("resources/templates/list"))["resourceTemplates"]
        assert templates == [{"uriTemplate": LOGS, "name": "console log"}]
        assert [r["uri"] for r in (await h.request("resources/list"))["resources"]] == ["unity://scene/active"]
        read = await h.request("resources/read", {"uri": "unity://logs/5"})
        assert read["contents"][0]["text"] == "read unity://logs/5"
        # the plugin completes nothing (no completion/complete): no values, no error
        assert (await h.request("completion/complete", complete("1")))["completion"]["values"] == []


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_templates_follow_the_backend_with_one_notification(backend: Backend, wire: Any) -> None:
    backend.templates = [{"uriTemplate": LOGS, "name": "console log"}]
    server = Server("unity")
    async with mirrored(server, backend) as mirror, connect(server, wire) as h:
        assert len((await h.request("resources/templates/list"))["resourceTemplates"]) == 1
        before = mirror.changes
        backend.templates = [{"uriTemplate": "unity://prefabs/{+path}", "name": "prefab"}]
        backend.notify("notifications/resources/list_changed")
        await h.eventually(lambda: mirror.changes > before)
        await h.request("ping")
        assert len(h.notifications_of(RESOURCES_CHANGED)) == 1  # one for the removal and the addition
        templates = (await h.request("resources/templates/list"))["resourceTemplates"]
        assert [t["uriTemplate"] for t in templates] == ["unity://prefabs/{+path}"]
        read = await h.request("resources/read", {"uri": "unity://prefabs/Enemies/Orc.prefab"})
        assert read["contents"][0]["text"] == "read unity://prefabs/Enemies/Orc.prefab"
        with pytest.raises(RpcError):
            await h.request("resources/read", {"uri": "unity://logs/20"})


@pytest.mark.asyncio
async def test_the_servers_own_template_is_kept(backend: Backend, wire: Any) -> None:
    backend.templates = [{"uriTemplate": LOGS, "name": "console log"}]
    server = Server("unity")

    @server.resource_template(LOGS)
    def own_logs(count: str) -> str:
        return f"own {count}"

    async with mirrored(server, backend), connect(server, wire) as h:
        read = await h.request("resources/read", {"uri": "unity://logs/3"})
        assert read["contents"][0]["text"] == "own 3" and reads(backend) == []


def test_draft3_required_flags_become_the_objects_required_list() -> None:
    legacy = {"name": "spawn", "parameters": {"type": "object", "properties": {
        "prefab": {"type": "string", "required": True},
        "count": {"type": "integer", "required": False},
        "at": {"type": "object", "properties": {"x": {"type": "number", "required": True},
                                                "y": {"type": "number"}}},
        "tags": {"type": "array", "items": {"type": "object", "properties": {
            "required": {"type": "boolean", "required": True}}}},
    }}}
    schema = adapt_legacy(legacy)["inputSchema"]
    assert schema == {"type": "object", "properties": {
        "prefab": {"type": "string"},
        "count": {"type": "integer"},
        "at": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x"]},
        "tags": {"type": "array", "items": {"type": "object", "properties": {"required": {"type": "boolean"}},
                                            "required": ["required"]}},
    }, "required": ["prefab"]}
    # a bare properties map (args) too, merged with a required list already there
    bare = adapt_legacy({"name": "old", "args": {"n": {"type": "integer", "required": True}}})
    assert bare["inputSchema"] == {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    merged = adapt_legacy({"name": "m", "inputSchema": {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string"}, "b": {"type": "string", "required": True}}}})
    assert merged["inputSchema"]["required"] == ["a", "b"]
    modern = {"name": "new", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}},
                                             "required": ["a"]}}
    assert adapt_legacy(modern) == modern


@pytest.mark.req("JS-02")
@pytest.mark.asyncio
async def test_a_draft3_tool_is_mirrored_and_its_required_parameter_enforced(backend: Backend, wire: Any) -> None:
    backend.tools = [{"name": "spawn", "description": "Spawn a prefab.", "parameters": {
        "type": "object", "properties": {"prefab": {"type": "string", "required": True},
                                         "count": {"type": "integer", "required": False}}}}]
    backend.handlers["spawn"] = lambda a: f"spawned {a.get('count', 1)} {a['prefab']}"
    server = Server("unity")
    async with mirrored(server, backend), connect(server, wire) as h:
        (tool,) = (await h.request("tools/list"))["tools"]
        assert tool["inputSchema"]["required"] == ["prefab"]
        missing = await h.request("tools/call", {"name": "spawn", "arguments": {"count": 2}})
        assert missing["isError"] is True and "prefab" in missing["content"][0]["text"]
        assert not [m for m in backend.received if m.get("method") == "tools/call"]
        done = await h.request("tools/call", {"name": "spawn", "arguments": {"prefab": "Orc", "count": 2}})
        assert done["content"][0]["text"] == "spawned 2 Orc"
