"""The in-memory transport: an mcpkit Server driven in-process, with every message JSON-encoded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.client import Client, ClientError, RpcError
from mcpkit.reference import server as reference

aio = pytest.mark.asyncio


@aio
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_each_handshake_revision_in_memory(version: str) -> None:
    async with Client(reference, protocol_version=version) as client:
        assert client.transport.kind == "memory"
        assert client.protocol_version == version
        result = await client.call_tool("add", {"a": 1, "b": 2})
        assert ("structuredContent" in result) is (version in ("2025-06-18", "2025-11-25"))
        assert client.stderr == "" and client.returncode is None and client.stdout_noise == []


@aio
async def test_modern_mode_and_input_required_in_memory() -> None:
    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Zoe"}}

    async with Client(reference, protocol_version="2026-07-28", elicitation_handler=elicit) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("test_input_required_result_elicitation")
        assert result["content"] == [{"type": "text", "text": "Hello, Zoe!"}]
        assert result["resultType"] == "complete"
        prompt = await client.request("prompts/get", {"name": "test_input_required_result_prompt"},
                                      fulfil_inputs=False)
        assert prompt["resultType"] == "input_required"


@aio
async def test_pagination_follows_next_cursor() -> None:
    server = Server("paged", page_size=2)
    for i in range(5):
        server.add_tool(f"t{i}", lambda arguments: "ok", input_schema={"type": "object"}, description=f"tool {i}")
        server.prompt(lambda: "hi", name=f"p{i}", description=f"prompt {i}")
        server.add_resource(f"mem://r{i}", lambda: "text", name=f"r{i}")
    async with Client(server) as client:
        assert [t["name"] for t in await client.list_tools()] == ["t0", "t1", "t2", "t3", "t4"]
        assert [p["name"] for p in await client.list_prompts()] == ["p0", "p1", "p2", "p3", "p4"]
        assert [r["uri"] for r in await client.list_resources()] == [f"mem://r{i}" for i in range(5)]
        first = await client.request("tools/list")
        assert len(first["tools"]) == 2 and "nextCursor" in first
        assert sorted(client.tools.names()) == ["t0", "t1", "t2", "t3", "t4"]


@aio
async def test_cancelling_stops_the_handler_on_the_server() -> None:
    server = Server("cancellable")
    started = asyncio.Event()
    stopped = asyncio.Event()

    @server.tool
    async def wait_forever(ctx: Context) -> str:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return "never"

    async with Client(server) as client:
        call = asyncio.ensure_future(client.call_tool("wait_forever"))
        await asyncio.wait_for(started.wait(), 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(stopped.wait(), 5)
        assert await client.ping() == {}
    assert client.unmatched == []


@aio
async def test_list_changed_notifications_and_on_notification() -> None:
    server = Server("dynamic")
    server.add_tool("first", lambda arguments: "1", input_schema={"type": "object"})
    seen: list[str] = []
    async with Client(server, on_notification=lambda m: seen.append(m["method"])) as client:
        server.add_tool("second", lambda arguments: "2", input_schema={"type": "object"})
        assert await client.ping() == {}
        await asyncio.sleep(0)
        assert seen == ["notifications/tools/list_changed"]
        assert [t["name"] for t in await client.list_tools()] == ["first", "second"]


@aio
async def test_arguments_travel_as_json() -> None:
    server = Server("json")
    got: list[Any] = []

    @server.tool
    def keep(items: list[int], label: str = "") -> int:
        """Records what it received."""
        got.append((items, label))
        return len(items)

    async with Client(server) as client:
        result = await client.call_tool("keep", {"items": (1, 2, 3)})  # a tuple becomes a JSON array
        assert result["structuredContent"] == {"result": 3}
    assert got == [([1, 2, 3], "")]


@aio
async def test_errors_and_roots_in_memory() -> None:
    async with Client(reference, roots=[{"uri": "file:///a", "name": "a"}]) as client:
        assert client.capabilities == {"roots": {"listChanged": True}}
        assert (await client.call_tool("list_roots"))["content"][0]["text"] == "a file:///a"
        with pytest.raises(RpcError) as err:
            await client.request("no/such/method")
        assert err.value.code == -32601
        with pytest.raises(RpcError) as err:
            await client.get_prompt("no_such_prompt")
        assert err.value.code == -32602
    with pytest.raises(ClientError, match="closed"):
        await client.ping()


@aio
async def test_answers_that_never_satisfy_the_server_end_after_a_bounded_number_of_rounds() -> None:
    calls = 0

    def elicit(params: dict[str, Any]) -> Any:
        nonlocal calls
        calls += 1
        return 12345  # not an ElicitResult: the server asks again (MR-08, MR-09)

    async with Client(reference, protocol_version="2026-07-28", elicitation_handler=elicit) as client:
        with pytest.raises(ClientError, match="still input_required after 16 rounds"):
            await client.call_tool("test_input_required_result_elicitation")
    assert calls == 16


@aio
async def test_a_server_cancelling_its_request_cancels_the_handler() -> None:
    server = Server("impatient", client_request_timeout=0.2)

    @server.tool
    async def ask(ctx: Context) -> str:
        """Asks the user, but not for long."""
        result = await ctx.elicit("Anyone?", {"type": "object", "properties": {}})
        return str(result)

    abandoned = asyncio.Event()

    async def never_answers(params: dict[str, Any]) -> dict[str, Any]:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            abandoned.set()
            raise
        return {"action": "cancel"}

    async with Client(server, elicitation_handler=never_answers) as client:
        result = await client.call_tool("ask")
        assert result["isError"] is True
        await asyncio.wait_for(abandoned.wait(), 5)
        request_id = client.server_requests[0]["id"]
        assert [n["params"]["requestId"] for n in client.notifications if n["method"] == "notifications/cancelled"] \
            == [request_id]


@aio
async def test_roots_changed_reaches_the_server() -> None:
    server = Server("roots")
    seen: list[Any] = []
    server.on_notification("notifications/roots/list_changed")(lambda *args: seen.append(args))
    async with Client(server, roots=[]) as client:
        await client.roots_changed()
        assert await client.ping() == {}
    assert len(seen) == 1
