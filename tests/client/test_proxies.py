"""Tool proxies: signature, doc, local validation, result shapes, ToolCallError."""

from __future__ import annotations

import inspect
import sys
from typing import Annotated, Any

import pytest

from mcpkit import Server, ToolError, text
from mcpkit.client import Client, ToolCallError, ToolProxy
from tests.client.servers import SDK_SERVER

aio = pytest.mark.asyncio


def build() -> tuple[Server, list[Any]]:
    server = Server("proxies")
    calls: list[Any] = []

    @server.tool
    def add(a: Annotated[int, "The first term"], b: Annotated[int, "The second term"] = 2) -> int:
        """Add two integers."""
        calls.append((a, b))
        return a + b

    @server.tool
    def greet(name: str) -> str:
        """Say hello."""
        return f"Hello, {name}!"

    @server.tool
    def two_blocks() -> list[Any]:
        """Two text blocks."""
        return [text("one"), text("two")]

    @server.tool
    def fail() -> str:
        """Always fails."""
        raise ToolError("it went wrong")

    server.add_tool("my.tool", lambda arguments: f"got {arguments.get('flag')}", description="Dotted name",
                    input_schema={"type": "object", "properties": {"flag": {"type": ["boolean", "null"]}}})
    return server, calls


@aio
async def test_signature_doc_and_attributes() -> None:
    server, _ = build()
    async with Client(server) as client:
        with pytest.raises(AttributeError, match="load"):
            client.tools.add  # noqa: B018 - not loaded yet
        assert await client.tools.load() is client.tools
        add = client.tools.add
        assert add.name == "add" and add.schema["required"] == ["a"]
        assert str(inspect.signature(add)) == "(*, a: int, b: int = 2)"
        assert add.__doc__ == "Add two integers.\n\nArgs:\n    a: The first term\n    b: The second term"
        assert client.tools["my.tool"].name == "my.tool"
        assert str(inspect.signature(client.tools["my.tool"])) == "(*, flag=None)"
        assert "add" in client.tools and len(client.tools) == 5
        assert "add" in dir(client.tools) and "my.tool" not in dir(client.tools)
        with pytest.raises(AttributeError, match="no tool 'nope'"):
            client.tools.nope  # noqa: B018


@aio
async def test_result_shapes_and_tool_errors() -> None:
    server, calls = build()
    async with Client(server) as client:
        await client.list_tools()  # also loads the proxies
        assert await client.tools.add(a=1) == {"result": 3}
        assert calls == [(1, 2)]
        assert await client.tools.greet(name="Ann") == "Hello, Ann!"
        whole = await client.tools.two_blocks()
        assert whole["content"] == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
        with pytest.raises(ToolCallError, match="it went wrong") as err:
            await client.tools.fail()
        assert err.value.result["isError"] is True
        assert await client.tools["my.tool"](flag=None) == "got None"  # null allowed: sent
        assert await client.tools["my.tool"](flag=True) == "got True"


@aio
async def test_arguments_are_validated_before_sending() -> None:
    server, calls = build()
    async with Client(server) as client:
        await client.tools.load()
        sent_before = len(client.notifications) + len(client.unmatched)
        with pytest.raises(ValueError, match=r"invalid arguments for tool 'add': /a: \"x\" is not of type \"integer\""):
            await client.tools.add(a="x")
        with pytest.raises(ValueError, match=r"\(root\): \"a\" is a required property"):
            await client.tools.add(b=1)
        with pytest.raises(ValueError, match="greet"):
            await client.tools.greet()
        assert calls == []
        assert len(client.notifications) + len(client.unmatched) == sent_before


@aio
async def test_proxies_of_a_server_on_the_official_sdk() -> None:
    async with Client([sys.executable, SDK_SERVER]) as client:
        assert client.protocol_version == "2025-11-25"
        await client.tools.load()
        assert len(client.tools) == 200
        dummy = client.tools.dummy_007
        assert str(inspect.signature(dummy)) == "(*, x: int, label: str = '')"
        assert dummy.__doc__.startswith("Dummy tool number 7:")
        assert await dummy(x=1) == {"result": 8}
        assert await client.tools.add(a=20, b=22) == {"result": 42}
        assert await client.tools.echo(text="héllo") == {"result": "héllo"}
        with pytest.raises(ValueError, match="/x"):
            await dummy(x="one")


def test_a_schema_that_cannot_be_compiled_is_left_to_the_server() -> None:
    proxy = ToolProxy(None, {"name": "remote", "inputSchema": {"$ref": "https://example.com/schema.json"}})  # type: ignore[arg-type]
    proxy.validate({"anything": 1})  # no local verdict: the server decides
    assert str(inspect.signature(proxy)) == "()"
