"""The tool_use/tool_result pairing of sampling messages (SA-05).

A handler replaying a tool loop in ``ctx.sample`` must answer every assistant tool_use with a
user tool_result right after it, in a user message of tool results only; the server refuses
anything else before it is sent, and mcpkit's client refuses such a request from a server
(-32602) before its sampling handler sees it.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.client import Client
from mcpkit.protocol.sampling import pairing_problem
from mcpkit.server.context import ClientCapabilityError, SamplingMessagesError
from tests.harness import connect

TOOLS = [{"name": "weather", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks) if len(blocks) != 1 else blocks[0]}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks) if len(blocks) != 1 else blocks[0]}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def use(id: str, city: str = "Paris") -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "weather", "input": {"city": city}}


def result(id: str) -> dict[str, Any]:
    return {"type": "tool_result", "toolUseId": id, "content": [text("18C")]}


LOOP = [
    user(text("Weather in Paris and Oslo?")),
    assistant(text("Checking."), use("a"), use("b", "Oslo")),
    user(result("b"), result("a")),  # any order, both answered
    assistant(use("c")),
    user(result("c")),  # a single block, not a list
    assistant(text("Paris 18C, Oslo 18C.")),
    user(text("Thanks")),
]


@pytest.mark.req("SA-05")
def test_a_well_paired_tool_loop_passes():
    assert pairing_problem(LOOP) is None
    assert pairing_problem([user(text("hi"))]) is None
    assert pairing_problem([]) is None


@pytest.mark.req("SA-05")
@pytest.mark.parametrize(("messages", "problem"), [
    ([user(text("q")), assistant(use("a"))],
     "messages[1] asks for tool use 'a', but no user message with the matching tool_result blocks follows it."),
    ([assistant(use("a")), user(text("never mind"))],
     "messages[0] asks for tool use 'a', but messages[1] follows it without the tool_result blocks"),
    ([assistant(use("a")), assistant(text("hm")), user(result("a"))],
     "messages[0] asks for tool use 'a', but messages[1] follows it"),
    ([assistant(use("a"), use("b")), user(result("a"))],
     "messages[1] answers messages[0] but not its tool use 'b'"),
    ([user(text("q")), user(result("ghost"))],
     "messages[1] has a tool_result for toolUseId 'ghost', which does not answer a tool_use of an assistant "
     "message just before it."),
    ([assistant(use("a")), user(result("z"), result("a"))],
     "messages[1] has a tool_result for toolUseId 'z', which does not answer any tool_use of messages[0]."),
    ([assistant(use("a")), user(result("a"), text("and also..."))],
     "messages[1] mixes tool_result blocks with other content"),
    ([assistant(use("a")), user(result("a"), result("a"))],
     "messages[1] answers tool use 'a' more than once."),
    ([assistant(use("a")), assistant(result("a"))],
     "messages[1] holds tool_result blocks but its role is 'assistant'"),
    ([user(use("a"))],
     "messages[0] holds tool_use blocks but its role is 'user'"),
    ([assistant(use("a"), use("a")), user(result("a"))],
     "messages[0] uses the tool use id 'a' more than once."),
    # a result answers only the assistant message just before it, not an earlier one
    ([assistant(use("a")), user(result("a")), assistant(text("ok")), user(result("a"))],
     "messages[3] has a tool_result for toolUseId 'a'"),
])
def test_unpaired_tool_use_and_results_are_named(messages, problem):
    found = pairing_problem(messages)
    assert found is not None and found.startswith(problem), found


@pytest.mark.req("SA-05")
def test_tuples_are_checked_as_the_arrays_they_are_sent_as():
    # the encoder writes a tuple as a JSON array: messages or content given as tuples are the
    # same messages on the wire, and get the same check
    bad = [user(text("q")), assistant(use("a")), user(text("what now?"))]
    expected = pairing_problem(bad)
    assert expected is not None
    assert pairing_problem(tuple(bad)) == expected
    as_tuple = [bad[0], {"role": "assistant", "content": (use("a"),)}, bad[2]]
    assert pairing_problem(as_tuple) == expected


def _server(messages: list[dict[str, Any]]) -> Server:
    server = Server("loop")

    @server.tool
    async def ask(ctx: Context) -> str:
        answer = await ctx.sample(messages, tools=TOOLS)
        return answer["content"]["text"]

    @server.tool
    async def raw(ctx: Context) -> str:
        # what a server that does not check sends (mcpkit's own ctx.sample refuses it)
        answer = await ctx._ask("sampling/createMessage", {"messages": messages, "maxTokens": 10, "tools": TOOLS},
                                5.0)
        return answer["content"]["text"]

    return server


def _answer(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": text("done"), "model": "m", "stopReason": "endTurn"}


@pytest.mark.req("SA-05")
@pytest.mark.asyncio
async def test_the_server_refuses_to_send_unpaired_messages(wire):
    bad = [user(text("q")), assistant(use("a")), user(text("what now?"))]
    caps = {"sampling": {"tools": {}}}
    async with connect(_server(bad), wire, "2025-11-25", caps, answers={"sampling/createMessage": _answer}) as h:
        refused = await h.request("tools/call", {"name": "ask", "arguments": {}})
        await h.settle()
        assert h.server_requests == []  # nothing reached the client
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == (
        "invalid sampling messages (SA-05): messages[1] asks for tool use 'a', but messages[2] follows it without "
        "the tool_result blocks that answer it; reply to every tool_use before any other message.")
    assert issubclass(SamplingMessagesError, ValueError) and issubclass(SamplingMessagesError, ClientCapabilityError)


@pytest.mark.req("SA-05")
@pytest.mark.asyncio
async def test_the_server_sends_a_paired_tool_loop(wire):
    caps = {"sampling": {"tools": {}}}
    async with connect(_server(LOOP), wire, "2025-11-25", caps, answers={"sampling/createMessage": _answer}) as h:
        ok = await h.request("tools/call", {"name": "ask", "arguments": {}})
    assert ok == {"content": [{"type": "text", "text": "done"}]}


@pytest.mark.req("SA-05")
@pytest.mark.asyncio
async def test_the_client_refuses_an_unpaired_request_from_a_server():
    seen: list[Any] = []

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return _answer(params)

    bad = [assistant(use("a")), user(result("b"))]
    async with Client(_server(bad), protocol_version="2025-11-25", sampling_handler=sample,
                      capabilities={"sampling": {"tools": {}}}) as client:
        refused = await client.call_tool("raw")
        assert refused["isError"] is True
        assert "-32602" in refused["content"][0]["text"]
        assert "Invalid sampling messages (SA-05): messages[1] has a tool_result for toolUseId 'b'" in \
            refused["content"][0]["text"]
        assert seen == []  # the sampling handler never saw it
    async with Client(_server(LOOP), protocol_version="2025-11-25", sampling_handler=sample,
                      capabilities={"sampling": {"tools": {}}}) as client:
        assert (await client.call_tool("raw"))["content"] == [{"type": "text", "text": "done"}]
    assert len(seen) == 1
