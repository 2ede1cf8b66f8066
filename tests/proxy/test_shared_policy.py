"""Several upstreams in one server: one tool policy shared by them, and names under one
upstream's prefix that another upstream's tools would also read as."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.client import Client
from mcpkit.policy import Gates, Policy
from mcpkit.policy.config import INHERIT
from mcpkit.proxy import ToolPolicy, upstreams_of
from tests.proxy.test_compose import until

aio = pytest.mark.asyncio
EXITS = [sys.executable, "-c", "raise SystemExit(3)"]  # an upstream that never comes up

#: written for upstream files's tools (listed files_read, files_...)
RULES = {"tools": {
    "files_read": {"read_only": True, "open_world": False, "rate_limit": "5/min"},
    "files_*": {"read_only": True, "open_world": False, "timeout": 5},
}}


@pytest.fixture
def parent() -> Any:
    server = Server("parent", policy=Policy(gates=Gates(read_only=True, allow_open_world=True)))
    yield server
    for upstream in upstreams_of(server):
        upstream.close()


def files() -> Server:
    child = Server("files")

    @child.tool
    def read() -> str:  # declares nothing: made read-only by the policy, for this upstream
        return "read"

    return child


def tickets(ran: list[str], *names: str) -> Server:
    """A server we did not write, whose (writing) tools are named like files's listed ones."""
    child = Server("tickets")
    for name in names:
        child.add_tool(name, lambda arguments, name=name: ran.append(name) or "wrote",
                       input_schema={"type": "object"}, description="Writes.")
    return child


def untouched(tool: Any) -> bool:
    """None of RULES reached the tool: the upstream's own (absent) claims stand."""
    return not (tool.annotations or {}).get("readOnlyHint") and tool.options.rate_limit is INHERIT \
        and tool.options.timeout is INHERIT


async def refused(client: Client, name: str) -> bool:
    result = await client.call_tool(name)
    return result.get("isError") is True and "read-only" in result["content"][0]["text"]


@aio
@pytest.mark.parametrize("given", ["one object", "equal dicts", "one file"])
async def test_a_rule_for_one_upstreams_listed_tool_does_not_reach_anothers_tool_of_that_name(
        parent: Server, given: str, tmp_path: Path) -> None:
    """[tools.files_read] is files's read; tickets's own files_read (listed tickets_files_read)
    used to take it too, and with it read_only = true: a write tool through --read-only."""
    if given == "one object":
        policy: Any = ToolPolicy.from_dict(RULES)
        first = second = policy
    elif given == "equal dicts":
        first, second = dict(RULES), dict(RULES)
    else:
        path = tmp_path / "tools.toml"
        path.write_text('[tools.files_read]\nread_only = true\nopen_world = false\nrate_limit = "5/min"\n\n'
                        '[tools."files_*"]\nread_only = true\nopen_world = false\ntimeout = 5\n')
        first = second = str(path)
    ran: list[str] = []
    parent.mount(files(), prefix="files", tool_policy=first)
    parent.mount(tickets(ran, "files_read", "files_delete"), prefix="tickets", tool_policy=second)
    tools = parent.tools
    assert tools["files_read"].annotations["readOnlyHint"] is True
    assert tools["files_read"].options.rate_limit is not INHERIT
    assert untouched(tools["tickets_files_read"]) and untouched(tools["tickets_files_delete"])
    async with Client(parent) as client:
        assert [t["name"] for t in await client.list_tools()] == ["files_read"]
        assert await refused(client, "tickets_files_read")
        assert await refused(client, "tickets_files_delete")
        assert (await client.call_tool("files_read"))["content"][0]["text"] == "read"
    assert ran == []


@aio
@pytest.mark.parametrize("files_first", [True, False])
async def test_a_rule_under_another_upstreams_prefix_does_not_reach_an_own_name_while_that_one_is_down(
        parent: Server, files_first: bool, caplog: Any) -> None:
    """While files lists nothing (down from the start), no listed name matches files_read or
    files_*: they must still not be read as tickets's own names."""
    policy = ToolPolicy.from_dict(RULES)
    ran: list[str] = []
    with caplog.at_level(logging.WARNING, logger="mcpkit.proxy"):
        if files_first:
            down = parent.mount(EXITS, prefix="files", tool_policy=policy)
        parent.mount(tickets(ran, "files_read", "files_delete"), prefix="tickets", tool_policy=policy)
        if not files_first:
            down = parent.mount(EXITS, prefix="files", tool_policy=policy)
    said = [r.getMessage() for r in caplog.records if "could name another upstream's tools" in r.getMessage()]
    assert any("[tools.files_read]" in m and "'files_read'" in m and "[tools.tickets_files_read]" in m
               for m in said), said
    assert any('[tools."files_*"]' in m and "'files_delete'" in m for m in said), said
    assert not down.up
    assert untouched(parent.tools["tickets_files_read"]) and untouched(parent.tools["tickets_files_delete"])
    async with Client(parent) as client:
        assert await client.list_tools() == []
        assert await refused(client, "tickets_files_read")
    assert ran == []


@aio
async def test_mounting_and_closing_an_upstream_matches_the_others_tools_again(parent: Server) -> None:
    """Alone, tickets's own files_read is what [tools.files_read] names (as with one upstream).
    Once files is mounted it is files's read: the tool already served loses the rule, and the
    clients are told; once files is closed, it is tickets's again."""
    policy = ToolPolicy.from_dict(RULES)
    ran: list[str] = []
    parent.mount(tickets(ran, "files_read"), prefix="tickets", tool_policy=policy)
    async with Client(parent) as client:
        assert [t["name"] for t in await client.list_tools()] == ["tickets_files_read"]
        client.notifications.clear()
        upstream = parent.mount(files(), prefix="files", tool_policy=policy)
        assert untouched(parent.tools["tickets_files_read"])
        await until(lambda: any(n["method"] == "notifications/tools/list_changed" for n in client.notifications))
        assert [t["name"] for t in await client.list_tools()] == ["files_read"]
        assert await refused(client, "tickets_files_read")
        assert ran == []
        upstream.close()
        assert parent.tools["tickets_files_read"].annotations["readOnlyHint"] is True
        assert [t["name"] for t in await client.list_tools()] == ["tickets_files_read"]


@aio
async def test_a_tool_another_upstream_adds_at_run_time_does_not_take_the_rules_either(parent: Server) -> None:
    policy = ToolPolicy.from_dict(RULES)
    ran: list[str] = []
    child = tickets(ran, "status")
    parent.mount(files(), prefix="files", tool_policy=policy)
    parent.mount(child, prefix="tickets", tool_policy=policy)
    async with Client(parent) as client:
        assert [t["name"] for t in await client.list_tools()] == ["files_read"]
        child.add_tool("files_read", lambda arguments: ran.append("files_read") or "wrote",
                       input_schema={"type": "object"})
        await until(lambda: "tickets_files_read" in parent.tools)
        assert untouched(parent.tools["tickets_files_read"])
        assert [t["name"] for t in await client.list_tools()] == ["files_read"]
        assert await refused(client, "tickets_files_read")
    assert ran == []


@aio
async def test_upstreams_with_policies_of_their_own_keep_matching_their_own_names(parent: Server) -> None:
    """Not shared: tickets's own policy names tickets's tools, as with one upstream."""
    ran: list[str] = []
    parent.mount(files(), prefix="files", tool_policy={"tools": {"read": {"read_only": True}}})
    parent.mount(tickets(ran, "files_read"), prefix="tickets", tool_policy={"tools": {
        "files_read": {"read_only": True}}})
    assert parent.tools["files_read"].annotations["readOnlyHint"] is True
    assert parent.tools["tickets_files_read"].annotations["readOnlyHint"] is True


def test_resolve_takes_the_prefixes_of_the_other_upstreams_sharing_the_policy() -> None:
    policy = ToolPolicy.from_dict(RULES)
    assert policy.resolve("tickets_files_read", "files_read") != {}  # one upstream: its own name
    for others in (["files_"], ["other_", "files_"], [""]):
        assert policy.resolve("tickets_files_read", "files_read", others=others) == {}
    assert policy.resolve("tickets_files_read", "files_read", others=["fil3s_"]) != {}
    # a glob that may match a name under files_ is read as listed names only
    rules = ToolPolicy.from_dict({"tools": {"f*": {"hidden": True}, "[!f]ook*": {"timeout": 3}}})
    assert rules.resolve("tickets_fetch", "fetch", others=["files_"]) == {}
    assert rules.resolve("tickets_fetch", "fetch") == {"hidden": True}
    # one that cannot is read as an upstream name when no listed name matches it, as with one
    assert rules.resolve("tickets_lookup", "lookup", others=["files_"]) == {"timeout": 3}


@pytest.mark.parametrize(("pattern", "reaches"), [
    ("files_read", True), ("files_*", True), ("f*", True), ("?iles_x", True), ("[ft]*", True),
    ("file[!x]_*", True), ("file[]s]_*", True), ("files_", True),
    ("files", False), ("fil", False), ("read_*", False), ("[!f]*", False), ("file[]]_*", False), ("t*", False),
])
def test_a_pattern_is_read_as_listed_names_when_it_can_match_a_name_under_another_prefix(
        pattern: str, reaches: bool) -> None:
    """(as fnmatch reads it: a ``]`` first in a class is part of it; ``[!...]`` negates)"""
    policy = ToolPolicy.from_dict({"tools": {pattern: {"timeout": 3}}})
    # the upstream's own name matches every pattern here; its listed one none of them
    own = pattern.replace("*", "x").replace("?", "f").replace("[!x]", "s").replace("[]s]", "s") \
        .replace("[ft]", "f").replace("[!f]", "r").replace("[]]", "]")
    assert policy.resolve("zz_" + own, own, others=["files_"]) == ({} if reaches else {"timeout": 3})


# ------------------------------------------------------------------------------------- names


def nested() -> tuple[list[str], Server, Server]:
    """Upstream a's b_c and upstream a_b's c both read a_b_c (and so do their prompts)."""
    ran: list[str] = []
    a, a_b = Server("a"), Server("a_b")
    a.add_tool("b_c", lambda arguments: ran.append("a's b_c") or "a's b_c", input_schema={"type": "object"})
    a_b.add_tool("c", lambda arguments: ran.append("a_b's c") or "a_b's c", input_schema={"type": "object"},
                 read_only=True, open_world=False)
    a.add_prompt("b_p", lambda: "a's prompt")
    a_b.add_prompt("p", lambda: "a_b's prompt")
    return ran, a, a_b


@aio
@pytest.mark.parametrize("a_first", [True, False])
async def test_a_name_under_a_longer_prefix_is_that_upstreams_whoever_lists_it_first(
        parent: Server, a_first: bool, caplog: Any) -> None:
    """The first to list a_b_c used to serve it and take its rules: upstream a, mounted first,
    served its b_c as a_b_c with a_b's read_only = true, and a_b's c was not mirrored."""
    ran, a, a_b = nested()
    policy = {"tools": {"a_b_c": {"read_only": True}}}
    with caplog.at_level(logging.WARNING, logger="mcpkit.proxy"):
        if a_first:
            parent.mount(a, prefix="a", tool_policy=policy)
        parent.mount(a_b, prefix="a_b", tool_policy=policy)
        if not a_first:
            parent.mount(a, prefix="a", tool_policy=policy)
    assert sorted(parent.tools) == ["a_b_c"] and sorted(parent._prompts) == ["a_b_p"]
    async with Client(parent) as client:
        assert [t["name"] for t in await client.list_tools()] == ["a_b_c"]
        assert (await client.call_tool("a_b_c"))["content"][0]["text"] == "a_b's c"
        got = await client.get_prompt("a_b_p")
        assert got["messages"][0]["content"]["text"] == "a_b's prompt"
    assert ran == ["a_b's c"]
    said = [r.getMessage() for r in caplog.records if "is not mirrored" in r.getMessage()]
    assert any("tool 'b_c'" in m and "'a_b_c'" in m and "upstream a_b" in m for m in said), said
    assert any("prompt 'b_p'" in m for m in said), said
