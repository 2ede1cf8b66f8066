"""``mcpkit proxy --tool-search``: two upstreams behind one search/call pair, the proxy's guard
rails holding on calls through it; the config file's and the profiles' ``tool_search``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit.client import Client
from mcpkit.proxy.config import ConfigError
from mcpkit.proxy.profiles import load_profiles
from mcpkit.server.toolsearch import ToolSearch

aio = pytest.mark.asyncio
PY = sys.executable
PROXY = [PY, "-m", "mcpkit", "proxy"]
ROOT = Path(__file__).resolve().parents[2]


def two_upstreams(tmp_path: Path, **top: Any) -> Path:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "ref": {"command": PY, "args": ["-m", "mcpkit", "serve"]},
        "weather": {"command": PY, "args": ["-m", "mcpkit", "serve", str(ROOT / "examples" / "weather.py")]},
    }, **top}))
    return config


async def found(client: Client, query: str) -> list[str]:
    result = await client.call_tool("search_tools", {"query": query, "limit": 10})
    return [t["name"] for t in result["structuredContent"]["tools"]]


@aio
async def test_two_upstreams_behind_one_pair_with_the_guard_rails_on_calls_through_it(tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    args = [*PROXY, "--config", str(two_upstreams(tmp_path)), "--tool-search", "--search-pinned", "weather_*",
            "--read-only", "--audit", str(audit)]
    # PYTHONPATH, when set, names the mcpkit under test (the proxy and its upstreams run the same)
    async with Client(args, inherit_env=["PYTHONPATH"]) as client:
        listed = {t["name"] for t in await client.list_tools()}
        assert listed == {"weather_forecast", "search_tools", "call_tool"}
        assert (await found(client, "add two numbers"))[0] == "ref_add"  # the other upstream's tool
        result = await client.call_tool("call_tool", {"name": "ref_add", "arguments": {"a": 2, "b": 40}})
        assert result["structuredContent"] == {"result": 42}
        # not read-only upstream tools are hidden by --read-only: never found, refused as directly
        assert "ref_test_simple_text" not in await found(client, "simple text test")
        through = await client.call_tool("call_tool", {"name": "ref_test_simple_text", "arguments": {}})
        direct = await client.call_tool("ref_test_simple_text", {})
        assert through["isError"] is True and through["content"] == direct["content"]
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(line["tool"], line["outcome"]) for line in lines if line["tool"] != "search_tools"] == [
        ("ref_add", "ok"), ("ref_test_simple_text", "denied"), ("ref_test_simple_text", "denied")]


@aio
async def test_the_config_files_tool_search_and_the_full_list_for_a_named_client(tmp_path: Path) -> None:
    config = two_upstreams(tmp_path, tool_search={"pinned": ["ref_echo"], "full_list_clients": ["big-host"]})
    async with Client([*PROXY, "--config", str(config)], inherit_env=["PYTHONPATH"]) as client:
        assert {t["name"] for t in await client.list_tools()} == {"ref_echo", "search_tools", "call_tool"}
        assert "weather_forecast" in await found(client, "weather forecast for a city")
    async with Client([*PROXY, "--config", str(config)], inherit_env=["PYTHONPATH"],
                      client_info={"name": "big-host", "version": "1"}) as client:
        names = {t["name"] for t in await client.list_tools()}
        assert {"ref_add", "ref_echo", "weather_forecast"} <= names and "search_tools" not in names


@pytest.mark.parametrize(("args", "top", "message"), [
    (["--search-pinned", "x"], {}, "--search-pinned, --search-limit and --search-full-list-client need --tool-search"),
    (["--tool-search", "--search-limit", "0"], {}, "argument --search-limit"),
    (["--tool-search", "--search-limit", "51"], {}, "limit must be an integer from 1 to 50"),
    ([], {"tool_search": "yes"}, 'tool_search must be true, false or {"pinned"'),
    ([], {"tool_search": {"pin": ["x"]}}, "tool_search: unknown key(s) pin; it takes full_list_clients, limit, pinned"),
])
def test_a_tool_search_mistake_is_one_line(tmp_path: Path, args: list[str], top: dict[str, Any], message: str) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"ref": {"command": PY, "args": ["-V"]}}, **top}))
    done = subprocess.run([*PROXY, "--config", str(config), *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""


def test_a_profile_takes_its_own_tool_search_or_the_proxys(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"ref": {"command": PY}}, "profiles": {
        "small": {"tools": {"*": ["*"]}, "tool_search": {"pinned": ["echo"], "limit": 3}},
        "whole": {"tools": {"*": ["*"]}, "tool_search": False},
        "default": {"tools": {"*": ["*"]}}}}))
    small, whole, default = load_profiles(str(config), ["ref"])
    assert isinstance(small.tool_search, ToolSearch) and small.tool_search.pinned == ("echo",)
    assert small.tool_search.limit == 3
    assert whole.tool_search is None and default.tool_search == "inherit"
    config.write_text(json.dumps({"mcpServers": {"ref": {"command": PY}}, "profiles": {
        "bad": {"tools": {"*": ["*"]}, "tool_search": {"limit": "5"}}}}))
    with pytest.raises(ConfigError, match="profiles.bad.tool_search: limit must be an integer"):
        load_profiles(str(config), ["ref"])


@pytest.mark.asyncio
async def test_each_profile_serves_its_own_selection_behind_its_own_pair(tmp_path: Path) -> None:
    from mcpkit import Server
    from mcpkit.proxy.profiles import build_profiles

    upstream = Server("ref")
    for name, doc in (("read_file", "Read a text file."), ("write_file", "Write a text file."),
                      ("search_web", "Search the web.")):
        upstream.add_tool(name, (lambda said: lambda args: said)(name), input_schema={"type": "object"}, description=doc,
                          read_only=name != "write_file", destructive=False, open_world=False)
    hub = Server("hub")
    mounted = hub.mount(upstream, prefix="ref")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"ref": {"command": PY}}, "profiles": {
        "files": {"tools": {"ref": ["*_file"]}, "read_only": True},
        "whole": {"tools": {"*": ["*"]}, "tool_search": False},
        "pinned": {"tools": {"*": ["*"]}, "tool_search": {"pinned": ["ref_search_web"]}}}}))
    profiles = load_profiles(str(config), ["ref"])
    apps = build_profiles(hub, profiles, {id(mounted): "ref"}, None, {}, ToolSearch())
    async with Client(apps["files"].server) as client:  # the proxy's ToolSearch, its own selection and gates
        assert {t["name"] for t in await client.list_tools()} == {"search_tools", "call_tool"}
        found = await client.call_tool("search_tools", {"query": "web file text", "limit": 10})
        assert [t["name"] for t in found["structuredContent"]["tools"]] == ["ref_read_file"]
        assert (await client.call_tool("call_tool", {"name": "ref_read_file"}))["content"][0]["text"] == "read_file"
    async with Client(apps["whole"].server) as client:
        assert {t["name"] for t in await client.list_tools()} == {"ref_read_file", "ref_write_file", "ref_search_web"}
    async with Client(apps["pinned"].server) as client:
        assert {t["name"] for t in await client.list_tools()} == {"ref_search_web", "search_tools", "call_tool"}
