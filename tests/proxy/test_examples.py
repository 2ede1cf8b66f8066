"""The composition and proxy examples (docs/composition.md, docs/proxy.md) run as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit.cli import load_server
from mcpkit.client import Client
from mcpkit.proxy import upstreams_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
aio = pytest.mark.asyncio


@aio
async def test_the_composition_example() -> None:
    server = load_server(str(EXAMPLES / "composition.py"))
    try:
        async with Client(server) as client:
            assert [t["name"] for t in await client.list_tools()] == ["weather_forecast", "units_to_celsius"]
            assert (await client.call_tool("units_to_celsius", {"fahrenheit": 212}))["structuredContent"] == {
                "result": 100.0}
            assert "Sunny in Oslo" in (await client.call_tool("weather_forecast", {"city": "Oslo"}))["content"][0][
                "text"]
            read = await client.read_resource("weather://weather/current")
            assert read["contents"][0]["text"] == "Clear, 18 °C."
            assert [p["name"] for p in await client.list_prompts()] == ["weather_plan_trip"]
    finally:
        for upstream in upstreams_of(server):
            upstream.close()


@aio
async def test_the_proxy_example() -> None:
    server = load_server(str(EXAMPLES / "proxy.py"))
    try:
        assert server.name == "guarded-reference"
        async with Client(server) as client:
            names = {t["name"] for t in await client.list_tools()}
            assert "echo" in names and "add" not in names and not any(n.startswith("test_") for n in names)
            refused = await client.call_tool("add", {"a": 1, "b": 2})
            assert refused.get("isError") is True and "read-only" in refused["content"][0]["text"]
            assert (await client.call_tool("echo", {"text": "guarded"}))["content"][0]["text"] == "guarded"
    finally:
        for upstream in upstreams_of(server):
            upstream.close()
