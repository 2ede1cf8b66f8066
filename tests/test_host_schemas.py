"""host_schemas: each host is listed the names and schemas it accepts (mcpkit/hostschemas.py), and its
calls are mapped back and validated against the tools' own schemas."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.hosts import DEFAULT_HOSTS, tool_problems
from mcpkit.hostschemas import TARGETS, host_of_client, restore_arguments, served_name, served_tool
from tests.harness import connect

RAW = {
    "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
    "properties": {"target": {"anyOf": [{"$ref": "#/$defs/Target"}, {"type": "null"}]},
                   "mode": {"enum": ["fast", "safe"], "default": "safe"},
                   "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
    "required": ["target"],
    "$defs": {"Target": {"type": "object", "properties": {"path": {"type": "string", "minLength": 1},
                                                          "line": {"type": ["integer", "null"]}},
                         "required": ["path"], "additionalProperties": False}},
}
UNION = {"type": "object", "oneOf": [
    {"properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": False},
    {"properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}]}


def server(host_schemas: str | None = "auto") -> Server:
    s = Server("files", host_schemas=host_schemas)

    @s.tool(read_only=True)
    def forecast(city: str, days: int = 3, unit: str | None = None) -> dict[str, Any]:
        """Daily highs."""
        return {"city": city, "days": days, "unit": unit}

    s.add_tool("files.read", lambda a: {"got": a}, description="Read a file.", input_schema=RAW)
    s.add_tool("pick", lambda a: {"got": a}, description="Pick one.", input_schema=UNION, flatten=True)
    return s


async def listing(s: Server, wire: Any, client: str) -> tuple[Any, list[dict[str, Any]]]:
    async with connect(s, wire, None) as c:
        await c.initialize("2025-11-25", client_info={"name": client, "version": "1"})
        return None, (await c.request("tools/list"))["tools"]


@pytest.mark.asyncio
@pytest.mark.parametrize(("client", "host"), [("claude-code", "claude"), ("claude-ai", "claude"),
                                              ("gemini-cli-mcp-client", "gemini"), ("codex-mcp-client", "openai")])
async def test_auto_lists_each_known_client_what_its_host_accepts(wire: Any, client: str, host: str) -> None:
    assert host_of_client({"name": client}) == host
    raw = [t.describe() for t in server(None)._tools.values()]
    assert [p.feature for t in raw for p in tool_problems(t, [host])]  # the tools as registered fail it
    _, tools = await listing(server(), wire, client)
    assert [str(p) for t in tools for p in tool_problems(t, [host])] == []
    assert len(tools) == 3


@pytest.mark.asyncio
async def test_a_client_not_known_is_listed_the_copy_every_default_host_takes(wire: Any) -> None:
    _, tools = await listing(server(), wire, "mcp-inspector")
    assert [str(p) for t in tools for p in tool_problems(t, DEFAULT_HOSTS)] == []
    assert [t["name"] for t in tools] == ["forecast", "files_read", "pick"]
    _, tools = await listing(server(None), wire, "mcp-inspector")  # host_schemas off: as registered
    assert {t["name"]: t["inputSchema"] for t in tools}["files.read"] == RAW


@pytest.mark.parametrize("host", TARGETS)
def test_every_target_passes_its_hosts_rules(host: str) -> None:
    for tool in server(None)._tools.values():
        served = served_tool(tool.describe(), host)
        hosts = DEFAULT_HOSTS if host == "portable" else [host]
        assert [str(p) for p in tool_problems(served, hosts)] == [], (host, tool.name)


def test_the_strict_variant_makes_optional_properties_required_and_nullable() -> None:
    schema = served_tool(server(None)._tools["forecast"].describe(), "openai-strict")["inputSchema"]
    assert schema == {"type": "object", "additionalProperties": False, "required": ["city", "days", "unit"],
                      "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]},
                                     "unit": {"type": ["string", "null"]}}}
    raw = served_tool({"name": "r", "inputSchema": RAW}, "openai-strict")["inputSchema"]
    assert raw["properties"]["mode"] == {"enum": ["fast", "safe", None]}
    target = raw["properties"]["target"]["anyOf"][0]
    assert target["required"] == ["path", "line"] and target["additionalProperties"] is False
    assert "$defs" not in raw and "$schema" not in raw


def test_the_legacy_gemini_subset_has_one_type_a_node_and_no_refs() -> None:
    schema = served_tool({"name": "r", "inputSchema": RAW}, "gemini-openapi")["inputSchema"]
    assert schema["properties"]["target"] == {
        "type": "object", "nullable": True, "required": ["path"],
        "properties": {"path": {"type": "string"}, "line": {"type": "integer", "nullable": True}}}
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}  # uniqueItems dropped
    assert schema["properties"]["mode"] == {"enum": ["fast", "safe"], "type": "string"}  # default dropped


@pytest.mark.asyncio
async def test_a_strict_hosts_nulls_and_names_are_mapped_back_and_validated_against_the_original(wire: Any) -> None:
    s = server("openai-strict")
    async with connect(s, wire) as c:
        names = [t["name"] for t in (await c.request("tools/list"))["tools"]]
        assert names == ["forecast", "files_read", "pick"]
        out = await c.request("tools/call", {"name": "forecast", "arguments": {"city": "Oslo", "days": None,
                                                                              "unit": None}})
        assert out["structuredContent"] == {"city": "Oslo", "days": 3, "unit": None}  # null: the default
        out = await c.request("tools/call", {"name": "files_read", "arguments": {
            "target": {"path": "a.txt", "line": None}, "mode": None, "tags": None}})
        assert got(out) == {"target": {"path": "a.txt", "line": None}}
        # the original still decides: target is required there, a null path is not a string
        out = await c.request("tools/call", {"name": "files_read", "arguments": {"target": {"path": None}}})
        assert out["isError"] and "/target" in out["content"][0]["text"]
        # the flat copy of a root oneOf lists both ids; a call with both is refused by the original
        out = await c.request("tools/call", {"name": "pick", "arguments": {"id": "1", "path": "p"}})
        assert out["isError"]
        out = await c.request("tools/call", {"name": "pick", "arguments": {"id": "1", "path": None}})
        assert got(out) == {"id": "1"}


def got(result: dict[str, Any]) -> Any:
    assert not result.get("isError"), result
    return json.loads(result["content"][0]["text"])["got"]


def test_restore_arguments_keeps_a_null_the_original_accepts_or_requires() -> None:
    schema = {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string"}, "b": {"type": ["string", "null"]}, "c": {"type": "integer"},
        "d": {"type": "array", "items": {"type": "object", "properties": {"e": {"type": "string"}}}}}}
    assert restore_arguments({"a": None, "b": None, "c": None, "d": [{"e": None}]}, schema) == {
        "a": None, "b": None, "d": [{}]}


def test_inlining_keeps_properties_named_like_keywords_and_cuts_recursion() -> None:
    schema = {"type": "object", "properties": {"definitions": {"type": "string"}, "node": {"$ref": "#/$defs/Node"}},
              "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}}}
    served = served_tool({"name": "t", "inputSchema": schema}, "gemini")["inputSchema"]
    assert served["properties"]["definitions"] == {"type": "string"} and "$defs" not in served
    assert served["properties"]["node"]["properties"]["child"] == {"description": "A Node (recursive)."}


def test_names_are_made_valid_for_the_host_and_stay_distinct() -> None:
    assert served_name("files.read", "claude") == "files_read"
    assert served_name("files.read", "gemini") == "files.read"  # Gemini takes dots
    long = "x" * 70
    assert len(served_name(long, "openai")) == 64 and served_name(long, "openai") != served_name(long + "y", "openai")
    assert served_name("9lives", "gemini-openapi") == "_9lives"


def test_an_unknown_setting_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="host_schemas takes auto, portable, claude, openai, openai-strict, gemini"):
        Server("x", host_schemas="bard")


@pytest.mark.asyncio
async def test_a_mirrored_tool_a_default_host_refuses_is_warned_once_unless_host_schemas_serves_it(
        caplog: pytest.LogCaptureFixture) -> None:
    from mcpkit.client import Client
    from mcpkit.proxy.upstream import upstreams_of
    from tests.proxy.test_compose import until

    child = Server("child")
    child.add_tool("files.read", lambda a: "ok", description="Read.", input_schema=RAW, read_only=True,
                   open_world=False)
    caplog.set_level(logging.WARNING, logger="mcpkit")
    for host_schemas, warned in ((None, 1), ("auto", 0)):
        caplog.clear()
        parent = Server("parent", host_schemas=host_schemas)
        try:
            parent.mount(child)
            async with Client(parent) as client:
                assert len(await client.list_tools()) == 1
                # a change upstream: the mirror registers every tool again, and is not warned again
                child.add_tool("other", lambda a: "ok", description="Other.", input_schema={"type": "object"},
                               read_only=True, open_world=False)
                await until(lambda: len(parent.tools) == 2)  # the mirror's sync runs on the upstream's loop
            lines = [r.getMessage() for r in caplog.records if "'files.read'" in r.getMessage()]
            assert len(lines) == warned, lines
            if warned:
                assert "the hosts claude, openai, gemini would refuse it" in lines[0]
                assert 'host_schemas="auto"' in lines[0] and "--host-schemas auto" in lines[0]
        finally:
            for upstream in upstreams_of(parent):
                upstream.close()
            if "other" in child.tools:
                child.remove_tool("other")
