"""Tool search (server/toolsearch.py): a search/call pair listed instead of the catalog, on the
one request pipeline: what is hidden is never found nor callable, and a call through the pair
is the named tool's call in every respect (validation, gates, rate limit, middleware, audit)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, Server, ToolSearch
from mcpkit.client import RpcError
from mcpkit.policy import Policy
from mcpkit.policy.audit import AuditLog
from mcpkit.policy.gates import Gates
from mcpkit.server.toolsearch import FULL_LIST_META

aio = pytest.mark.asyncio


def catalog(**options: Any) -> Server:
    server = Server("files", **options)

    @server.tool(read_only=True, open_world=False)
    def ping() -> str:
        """Answer pong."""
        return "pong"

    @server.tool(read_only=True, open_world=False)
    def read_file(path: str) -> str:
        """Read the contents of a text file."""
        return f"contents of {path}"

    @server.tool(read_only=True, open_world=False)
    def list_directory(path: str) -> list[str]:
        """List the entries of a directory."""
        return ["a.txt"]

    @server.tool(destructive=True, open_world=False)
    def delete_file(path: str) -> str:
        """Delete a file from disk."""
        return f"deleted {path}"

    @server.tool(read_only=True, open_world=False, rate_limit="1/min")
    def weather(city: str) -> str:
        """Today's weather forecast for a city."""
        return f"sunny in {city}"

    return server


async def found(client: Client, query: str, **more: Any) -> list[str]:
    result = await client.call_tool("search_tools", {"query": query, **more})
    assert not result.get("isError"), result
    return [t["name"] for t in result["structuredContent"]["tools"]]


async def answer(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    """A tools/call's result, or its JSON-RPC error as (code, message)."""
    try:
        result = await client.call_tool(name, arguments)
    except RpcError as exc:
        return (exc.code, exc.message)
    result.get("_meta", {}).pop("dev.mcpkit/correlationId", None)  # each call's own
    return result


@aio
async def test_the_list_is_the_pinned_tools_and_the_pair_and_search_finds_the_rest() -> None:
    server = catalog(tool_search=ToolSearch(pinned=["ping"]))
    async with Client(server) as client:
        listed = {t["name"]: t for t in await client.list_tools()}
        assert set(listed) == {"ping", "search_tools", "call_tool"}
        assert listed["search_tools"]["annotations"]["readOnlyHint"] is True
        assert listed["call_tool"]["inputSchema"]["required"] == ["name"]
        assert (await found(client, "read a file's contents"))[0] == "read_file"
        assert (await found(client, "what is the weather in Paris"))[0] == "weather"
        assert "ping" not in await found(client, "answer pong")  # listed already: not offered again
        assert len(await found(client, "file directory path", limit=1)) == 1
        assert await found(client, "zzz qqq") == []
        definition = (await client.call_tool("search_tools", {"query": "directory"}))["structuredContent"]["tools"][0]
        assert definition["inputSchema"] == server._tools["list_directory"].input_schema


@pytest.mark.req("TL-11")
@aio
async def test_a_call_through_the_pair_is_the_tools_own_call() -> None:
    seen: list[tuple[str | None, Any]] = []

    def watch(cc: Any, call_next: Any) -> Any:
        seen.append((cc.name, cc.arguments))
        return call_next(cc)

    server = catalog(tool_search=True)
    server.add_middleware(watch, hook="on_call_tool")
    async with Client(server) as client:
        result = await client.call_tool("call_tool", {"name": "read_file", "arguments": {"path": "a.txt"}})
        assert result["content"][0]["text"] == "contents of a.txt"
        # validated against read_file's schema, with read_file's message, as a direct call is
        for arguments in ({"path": 3}, {}):
            assert await answer(client, "call_tool", {"name": "read_file", "arguments": arguments}) == \
                await answer(client, "read_file", arguments)
        # a name that is no tool: the same error as calling it directly
        assert await answer(client, "call_tool", {"name": "nope", "arguments": {}}) == \
            await answer(client, "nope", {}) == (-32602, "Unknown tool: nope")
        # the call tool is not a tool of its own: it cannot call itself
        assert await answer(client, "call_tool", {"name": "call_tool", "arguments": {"name": "ping"}}) == \
            (-32602, "Unknown tool: call_tool")
    assert seen[0] == ("read_file", {"path": "a.txt"})
    assert all(name in ("read_file", "nope", "call_tool") for name, _ in seen)


@aio
async def test_arguments_of_the_wrong_shape_are_the_call_tools_invalid_arguments() -> None:
    async with Client(catalog(tool_search=True)) as client:
        for wrong, problem in (({}, "/name: a string is required"), ({"name": 3}, "/name: a string is required"),
                               ({"name": "ping", "arguments": [1]}, "/arguments: must be an object"),
                               ({"name": "ping", "extra": 1}, "unexpected extra")):
            result = await client.call_tool("call_tool", wrong)
            assert result["isError"] is True
            assert result["content"][0]["text"].startswith(f"Invalid arguments for tool 'call_tool': {problem}")
    async with Client(catalog(tool_search=True), protocol_version="2025-06-18") as client:
        with pytest.raises(RpcError, match="Invalid arguments for tool 'call_tool'") as caught:
            await client.call_tool("call_tool", {"name": 3})
        assert caught.value.code == -32602


@pytest.mark.req("TL-11")
@aio
async def test_a_gated_tool_is_never_found_nor_callable_through_the_pair(tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    policy = Policy(gates=Gates(allow_destructive=False), audit=AuditLog(audit))
    server = catalog(tool_search=True, policy=policy)
    async with Client(server) as client:
        assert "delete_file" not in await found(client, "delete a file from disk", limit=10)
        through = await answer(client, "call_tool", {"name": "delete_file", "arguments": {"path": "x"}})
        direct = await answer(client, "delete_file", {"path": "x"})
        assert through == direct and through["isError"] is True
        await client.call_tool("call_tool", {"name": "read_file", "arguments": {"path": "a.txt"}})
    policy.audit.close()
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    # audited as the tools they name, never as call_tool
    assert [(line["tool"], line["outcome"]) for line in lines if line["tool"] != "search_tools"] == [
        ("delete_file", "denied"), ("delete_file", "denied"), ("read_file", "ok")]
    assert {line["tool"] for line in lines} == {"search_tools", "delete_file", "read_file"}


@aio
async def test_a_tool_a_middleware_hides_from_the_list_is_never_found() -> None:
    def hide(cc: Any, call_next: Any) -> Any:
        result = call_next(cc)
        return {**result, "tools": [t for t in result["tools"] if t["name"] != "read_file"]}

    server = catalog(tool_search=True)
    server.add_middleware(hide, hook="on_list_tools")
    async with Client(server) as client:
        assert "read_file" not in await found(client, "read the contents of a text file", limit=10)
        assert "list_directory" in await found(client, "directory entries")


@pytest.mark.req("TL-11")
@aio
async def test_the_rate_limit_is_the_tools_own_on_both_routes() -> None:
    async with Client(catalog(tool_search=True, policy=Policy())) as client:
        first = await client.call_tool("call_tool", {"name": "weather", "arguments": {"city": "Oslo"}})
        assert first["content"][0]["text"] == "sunny in Oslo"
        again = await client.call_tool("weather", {"city": "Oslo"})  # the same bucket: 1/min spent
        assert again["isError"] is True and "rate" in again["content"][0]["text"].lower()


@aio
async def test_the_index_follows_the_catalog_and_clients_are_told() -> None:
    server = catalog(tool_search=True)
    async with Client(server) as client:
        assert "translate" not in await found(client, "translate text into french")
        told = len([n for n in client.notifications if n.get("method") == "notifications/tools/list_changed"])

        @server.tool(read_only=True, open_world=False)
        def translate(text: str, language: str) -> str:
            """Translate text into another language."""
            return text

        assert (await found(client, "translate text into french"))[0] == "translate"
        # sent before the search's answer, on the same stream
        assert len([n for n in client.notifications if n.get("method") == "notifications/tools/list_changed"]) > told
        server.remove_tool("read_file")
        assert "read_file" not in await found(client, "read the contents of a text file", limit=10)
        assert await answer(client, "call_tool", {"name": "read_file", "arguments": {"path": "a"}}) == \
            (-32602, "Unknown tool: read_file")


@aio
async def test_a_host_gets_the_whole_list_when_it_asks() -> None:
    server = catalog(tool_search=ToolSearch(pinned=["ping"], full_list_clients=["claude-code"]))
    whole = {"ping", "read_file", "list_directory", "delete_file", "weather"}
    async with Client(server) as client:
        page = await client.request("tools/list", {"_meta": {FULL_LIST_META: True}})
        assert {t["name"] for t in page["tools"]} == whole
        assert {t["name"] for t in await client.list_tools()} == {"ping", "search_tools", "call_tool"}
    async with Client(server, client_info={"name": "claude-code", "version": "2.0"}) as client:
        assert {t["name"] for t in await client.list_tools()} == whole


def test_settings_are_checked_when_given() -> None:
    with pytest.raises(ValueError, match="limit must be an integer from 1 to 50"):
        ToolSearch(limit=0)
    with pytest.raises(TypeError, match="lists of names or globs"):
        ToolSearch(pinned="ping")
    with pytest.raises(ValueError, match="invalid tool name"):
        ToolSearch(call_name="call tool")
    server = Server("s")
    server.add_tool("call_tool", lambda args: "x", input_schema={"type": "object"})
    with pytest.raises(ValueError, match="a tool is named 'call_tool' already"):
        server.tool_search = True
    server.tool_search = ToolSearch(call_name="run_found_tool")
    assert "search_tools" in server._tools
    server.tool_search = ToolSearch(call_name="run_found_tool", limit=3)  # replaces its own search tool
    with pytest.raises(ValueError, match="a tool is named 'call_tool' already; give ToolSearch another search_name"):
        server.tool_search = ToolSearch(search_name="call_tool", call_name="run")
    server.tool_search = None
    assert "search_tools" not in server._tools


@aio
async def test_a_mount_mirrors_the_whole_catalog_of_a_child_with_tool_search() -> None:
    # each of the child's tools is the parent's own, under the parent's pipeline: a pair
    # mirrored as c_call_tool would have been a way past the parent's rules
    parent = Server("parent", policy=Policy(gates=Gates(allow_destructive=False)))
    assert parent.mount(catalog(tool_search=True), prefix="c").up
    async with Client(parent) as client:
        names = {t["name"] for t in await client.list_tools()}
        assert {"c_read_file", "c_ping", "c_weather"} <= names
        assert not names & {"c_search_tools", "c_call_tool", "c_delete_file"}


@aio
async def test_the_pair_works_per_request_under_2026_07_28() -> None:
    async with Client(catalog(tool_search=ToolSearch(pinned=["ping"])), protocol_version="2026-07-28") as client:
        assert {t["name"] for t in await client.list_tools()} == {"ping", "search_tools", "call_tool"}
        assert (await found(client, "list a directory"))[0] == "list_directory"
        result = await client.call_tool("call_tool", {"name": "list_directory", "arguments": {"path": "."}})
        assert result["structuredContent"] == {"result": ["a.txt"]}
        assert await answer(client, "call_tool", {"name": "nope"}) == await answer(client, "nope", {})


@aio
async def test_under_host_schemas_a_search_gives_the_hosts_copies_and_the_call_maps_back() -> None:
    server = Server("dotted", tool_search=True, host_schemas="openai-strict")

    @server.tool(name="files.read", read_only=True, open_world=False)
    def read(path: str, encoding: str | None = None) -> str:
        """Read a text file."""
        return f"{path} as {encoding or 'utf-8'}"

    async with Client(server) as client:
        (tool,) = [t for t in (await client.call_tool("search_tools", {"query": "read a text file"}))[
            "structuredContent"]["tools"]]
        assert tool["name"] != "files.read" and tool["inputSchema"]["required"] == ["path", "encoding"]
        # the strict variant's null for a left-out argument, read back as for a direct call
        result = await client.call_tool("call_tool", {"name": tool["name"], "arguments": {"path": "a", "encoding": None}})
        assert result["content"][0]["text"] == "a as utf-8"
        # strict mode cannot take a free-form object: the call tool takes the arguments as JSON text
        (call,) = [t for t in await client.list_tools() if t["name"] == "call_tool"]
        assert call["inputSchema"]["properties"]["arguments"]["type"] == "string"
        from mcpkit.hosts import tool_problems

        assert [str(p) for p in tool_problems(call, ["openai-strict"])] == []
        result = await client.call_tool("call_tool", {"name": tool["name"], "arguments": '{"path": "b", "encoding": null}'})
        assert result["content"][0]["text"] == "b as utf-8"
        refused = await client.call_tool("call_tool", {"name": tool["name"], "arguments": "[1]"})
        assert refused["isError"] is True and "Invalid arguments for tool 'call_tool'" in refused["content"][0]["text"]


@aio
async def test_a_tool_for_an_apps_view_alone_stays_listed_and_is_never_offered_to_the_model() -> None:
    server = catalog(tool_search=True)
    server.app("ui://files/view", html="<p>files</p>")

    @server.tool(read_only=True, open_world=False, ui="ui://files/view", ui_visibility=["app"])
    def refresh_file_view(path: str) -> str:
        """Refresh the file view with a file's contents."""
        return path

    async with Client(server) as client:
        assert {t["name"] for t in await client.list_tools()} == {"refresh_file_view", "search_tools", "call_tool"}
        assert "refresh_file_view" not in await found(client, "refresh the file view with contents", limit=10)


def test_the_command_line_lists_and_calls_the_whole_catalog() -> None:
    import subprocess
    import sys

    example = str(Path(__file__).resolve().parent.parent / "examples" / "tool_search.py")
    listed = subprocess.run([sys.executable, "-m", "mcpkit", "list", example, "--json"], capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert listed.returncode == 0, listed.stderr
    names = {t["name"] for t in json.loads(listed.stdout)["tools"]}
    assert {"help", "read_note", "search_notes"} <= names and "call_tool" not in names
    # the argument is read by search_notes's schema (a string), which a listing of the pair lacks
    called = subprocess.run([sys.executable, "-m", "mcpkit", "call", example, "search_notes", "words=2024"],
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert called.returncode == 0 and json.loads(called.stdout) == {"result": []}, called.stdout + called.stderr


@aio
async def test_a_tool_calling_the_call_tool_calls_the_tool_it_names() -> None:
    server = catalog(tool_search=True, policy=Policy(gates=Gates(allow_destructive=False)))
    # a batch-like tool passing its arguments on to the call tool (ctx.call_tool, nested)
    server.add_tool("relay", lambda args, ctx: ctx.call_tool("call_tool", args), input_schema={"type": "object"},
                    read_only=True, open_world=False)
    async with Client(server) as client:
        done = await client.call_tool("relay", {"name": "read_file", "arguments": '{"path": "n.txt"}'})
        assert "contents of n.txt" in json.dumps(done)
        # the gates refuse it as a nested call of delete_file, which never runs
        refused = await client.call_tool("relay", {"name": "delete_file", "arguments": {"path": "x"}})
        assert "E_PERMISSION_DENIED" in json.dumps(refused) and "deleted" not in json.dumps(refused)
