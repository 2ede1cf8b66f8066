"""A 2026-07-28 upstream (``protocol_version="2026-07-28"``): the real client's capabilities ride
each request, the inputs the upstream names keep their names, its tasks are followed there, and
its list changes arrive on a listen stream."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.client import Client, RpcError
from mcpkit.protocol.errors import MISSING_REQUIRED_CLIENT_CAPABILITY, McpError
from mcpkit.proxy import upstreams_of

aio = pytest.mark.asyncio
MODERN = "2026-07-28"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def child() -> Server:
    server = Server("child")

    @server.tool
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", NAME_FORM, key="user_name")
        return f"Hello, {answer['content']['name']}!"

    @server.tool
    async def both(ctx: Context) -> str:
        name, sampled = await asyncio.gather(ctx.elicit("Name?", NAME_FORM, key="name"),
                                             ctx.sample("Say hi", key="hi"))
        return f"{name['content']['name']} {sampled['content']['text']}"

    @server.tool
    def needs_sampling(ctx: Context) -> str:
        if "sampling" not in ctx.client_capabilities:
            raise McpError(MISSING_REQUIRED_CLIENT_CAPABILITY, "sampling is needed",
                           {"requiredCapabilities": {"sampling": {}}})
        return "declared"

    async def slow(arguments: dict[str, Any]) -> str:
        await asyncio.sleep(0.2)
        return "slow done"

    server.add_tool("slow", slow, input_schema={"type": "object"}, task="optional")
    return server


@pytest.fixture
def parent() -> Any:
    server = Server("parent")
    server.mount(child(), protocol_version=MODERN)
    yield server
    for upstream in upstreams_of(server):
        upstream.close()


async def accept(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Zoe"}}


async def sample(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}


@aio
async def test_the_inputs_an_upstream_names_reach_a_modern_client_under_their_names(parent: Server) -> None:
    async with Client(parent, protocol_version=MODERN, elicitation_handler=accept, sampling_handler=sample) as client:
        first = await client.request("tools/call", {"name": "greet", "arguments": {}}, fulfil_inputs=False)
        assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["user_name"]
        assert (await client.call_tool("greet"))["content"][0]["text"] == "Hello, Zoe!"
        first = await client.request("tools/call", {"name": "both", "arguments": {}}, fulfil_inputs=False)
        assert sorted(first["inputRequests"]) == ["hi", "name"]  # asked together, listed together
        assert (await client.call_tool("both"))["content"][0]["text"] == "Zoe hi"


@aio
async def test_a_handshake_client_answers_a_modern_upstreams_inputs_as_requests(parent: Server) -> None:
    asked: list[str] = []

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return await accept(params)

    async with Client(parent, elicitation_handler=elicit) as client:
        assert (await client.call_tool("greet"))["content"][0]["text"] == "Hello, Zoe!"
    assert asked == ["Your name?"]


@aio
async def test_the_real_clients_capabilities_reach_the_upstream(parent: Server) -> None:
    async with Client(parent, protocol_version=MODERN) as client:  # declares no sampling
        with pytest.raises(RpcError) as refused:
            await client.call_tool("needs_sampling")
        assert refused.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    async with Client(parent, protocol_version=MODERN, sampling_handler=sample) as client:
        assert (await client.call_tool("needs_sampling"))["content"][0]["text"] == "declared"


@aio
async def test_a_task_the_upstream_creates_is_followed_there(parent: Server) -> None:
    async with Client(parent, protocol_version=MODERN, capabilities=TASKS) as client:
        created = await client.request("tools/call", {"name": "slow", "arguments": {}})
        assert created["resultType"] == "task" and isinstance(created["taskId"], str)
        for _ in range(200):
            task = await client.request("tasks/get", {"taskId": created["taskId"]})
            if task["status"] == "completed":
                break
            await asyncio.sleep(0.02)
        assert task["result"]["content"] == [{"type": "text", "text": "slow done"}]
        with pytest.raises(RpcError):
            await client.request("tasks/get", {"taskId": "no-such-task"})
    async with Client(parent, protocol_version=MODERN) as client:  # no extension: a plain call
        assert (await client.call_tool("slow"))["content"][0]["text"] == "slow done"


@aio
async def test_list_changes_arrive_from_a_modern_upstream_even_when_they_change_back() -> None:
    source = child()
    parent = Server("parent")
    parent.mount(source, prefix="c", protocol_version=MODERN)
    try:
        async with Client(parent) as client:
            source.add_tool("extra", lambda a: "x", input_schema={"type": "object"})
            for _ in range(250):
                if "c_extra" in parent.tools:
                    break
                await asyncio.sleep(0.02)
            assert "c_extra" in parent.tools
            await asyncio.sleep(0.1)
            client.notifications.clear()
            source.add_tool("blip", lambda a: "x", input_schema={"type": "object"})
            source.remove_tool("blip")
            for _ in range(250):
                if any(n["method"] == "notifications/tools/list_changed" for n in client.notifications):
                    break
                await asyncio.sleep(0.02)
            assert any(n["method"] == "notifications/tools/list_changed" for n in client.notifications)
            assert "c_blip" not in parent.tools
    finally:
        for upstream in upstreams_of(parent):
            upstream.close()
