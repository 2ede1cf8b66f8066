"""The official `mcp` 2.3.0 client in its modern mode (server/discover, 2026-07-28) and its legacy
mode (initialize) against the same running mcpkit server, over stdio and Streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import mcpkit_command
from tests.interop.test_official_client_http import Tap, TapTransport

pytestmark = [
    pytest.mark.interop,
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def http_url(serving_loop: str) -> Any:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "serve", "--http", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "mcpkit serve --http did not start"
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def _stdio(wire: Any) -> StdioServerParameters:
    argv = wire.command(mcpkit_command("serve"))
    return StdioServerParameters(command=argv[0], args=argv[1:])


async def _exercise(client: Client) -> None:
    tools = {t.name for t in (await client.list_tools()).tools}
    assert {"add", "test_simple_text", "json_schema_2020_12_tool"} <= tools
    added = await client.call_tool("add", {"a": 20, "b": 22})
    assert added.structured_content == {"result": 42}
    assert added.is_error is not True
    text = await client.read_resource("test://static-text")
    assert text.contents[0].text == "This is the content of the static text resource."
    prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
    assert prompt.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'"


@pytest.mark.req("VN-03", "VN-06", "BP-14", "LC-02")
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_both_client_modes_over_stdio(wire: Any, mode: str) -> None:
    async with Client(_stdio(wire), mode=mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        await _exercise(client)


@asynccontextmanager
async def _tapped(url: str, wire: Any, **options: Any) -> AsyncIterator[Client]:
    """The official client over HTTP, with every message the server sends schema-checked."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    tap = Tap()
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(15.0, read=60.0), transport=TapTransport(tap)) as http:
        async with Client(streamable_http_client(url, http_client=http), **options) as client:
            yield client
            modern = client.protocol_version == "2026-07-28"
    if modern:
        tap.revision = "2026-07-28"  # no initialize to learn it from: the client pinned it at discover
    assert tap.record_into(wire) > 0


@pytest.mark.req("VN-03", "VN-06", "HM-01", "HM-15", "HL-15")
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_both_client_modes_over_http(http_url: str, wire: Any, mode: str) -> None:
    async with _tapped(http_url, wire, mode=mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        await _exercise(client)


@pytest.mark.req("VN-06", "MR-01", "MR-10")
async def test_a_modern_client_drives_multi_round_trip_inputs(http_url: str, wire: Any) -> None:
    from mcp import types

    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    async with _tapped(http_url, wire, elicitation_callback=elicitation) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("test_input_required_result_elicitation", {})
        assert result.content[0].text == "Hello, Alice!"


@pytest.mark.req("VN-06")
async def test_eras_alternate_on_one_http_endpoint(http_url: str, wire: Any) -> None:
    """Modern and legacy clients, interleaved, against the same endpoint of one process."""
    async with _tapped(http_url, wire, mode="legacy") as old, _tapped(http_url, wire) as new:
        for i in range(3):
            assert (await old.call_tool("add", {"a": i, "b": 1})).structured_content == {"result": i + 1}
            assert (await new.call_tool("add", {"a": i, "b": 2})).structured_content == {"result": i + 2}
        assert old.protocol_version == "2025-11-25" and new.protocol_version == "2026-07-28"
