"""The client against a server built on the official ``mcp`` SDK (bench/servers/sdk_server.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from mcpkit.client import Client, RpcError
from tests.client.servers import SDK_SERVER, sdk_http

aio = pytest.mark.asyncio
STDIO = [sys.executable, SDK_SERVER]


async def exercise(client: Client) -> None:
    tools = await client.list_tools()
    assert len(tools) == 200 and [t["name"] for t in tools[:3]] == ["add", "echo", "dummy_000"]
    result = await client.call_tool("add", {"a": 2, "b": 40})
    assert result["content"][0]["text"] == "42"
    result = await client.call_tool("echo", {"text": "x" * 10_000})
    assert result["content"][0]["text"] == "x" * 10_000
    with pytest.raises(RpcError):
        await client.read_resource("test://nothing")


@aio
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_each_handshake_revision_over_stdio(version: str) -> None:
    async with Client(STDIO, protocol_version=version) as client:
        assert client.protocol_version == version
        assert client.server_info["name"] == "bench-sdk"
        await exercise(client)
        assert await client.ping() == {}
    assert client.stdout_noise == []


@aio
async def test_modern_mode_over_stdio() -> None:
    async with Client(STDIO, protocol_version="2026-07-28") as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_info["name"] == "bench-sdk"
        await exercise(client)


@pytest.fixture(scope="module", params=["stateful-sse", "stateless-json"])
def sdk_url(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    with sdk_http(request.param) as base:
        yield request.param, f"{base}/mcp"


@aio
async def test_handshake_over_http(sdk_url: tuple[str, str]) -> None:
    mode, url = sdk_url
    async with Client(url) as client:
        assert client.protocol_version == "2025-11-25"
        if mode == "stateful-sse":
            assert client.transport.session_id
        else:
            assert client.transport.session_id is None
        await exercise(client)


@aio
async def test_modern_mode_over_http(sdk_url: tuple[str, str]) -> None:
    async with Client(sdk_url[1], protocol_version="2026-07-28") as client:
        assert client.protocol_version == "2026-07-28"
        assert client.transport.session_id is None
        await exercise(client)
