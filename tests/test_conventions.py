"""Conventions that cut across features: _meta keys, icons, URI schemes, ordering, error wording."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from mcpkit import Context, Server
from mcpkit.server.validation import SUPPORTED_DIALECTS
from tests.harness import RpcError, connect

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.req("MT-02", "MT-03")
@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("com.example/trace", True),
        ("plain", True),
        ("a-b.c/x_y.z", True),
        ("io.modelcontextprotocol/anything", False),  # second label is reserved (2025-11-25+)
        ("dev.mcp/x", False),
        ("com.example.mcp/x", True),  # only the second label counts
        ("-bad/x", False),
        ("com.example/", True),  # empty name is allowed
        ("com..example/x", False),
        ("com.example/_x", False),
    ],
)
def test_meta_keys_follow_the_format_and_avoid_reserved_prefixes(key: str, ok: bool) -> None:
    server = Server("t")
    if ok:
        server.add_tool("t", lambda a: "", input_schema={"type": "object"}, meta={key: 1})
        assert server.tools["t"].meta == {key: 1}
    else:
        with pytest.raises(ValueError, match="MT-0[23]"):
            server.add_tool("t", lambda a: "", input_schema={"type": "object"}, meta={key: 1})


@pytest.mark.req("IC-01", "IC-02")
@pytest.mark.parametrize(
    ("src", "ok"),
    [
        ("https://example.com/icon.png", True),
        ("data:image/png;base64,iVBORw0KGgo=", True),
        ("http://example.com/icon.png", False),
        ("javascript:alert(1)", False),
        ("file:///etc/icon.png", False),
    ],
)
def test_icons_must_be_https_or_data_uris(src: str, ok: bool) -> None:
    icons = [{"src": src, "mimeType": "image/png", "sizes": ["48x48"]}]
    if ok:
        assert Server("t", icons=icons).icons == icons
        Server("t").add_resource("test://x", lambda: "", name="x", icons=icons)
    else:
        with pytest.raises(ValueError, match="IC-02"):
            Server("t", icons=icons)
        with pytest.raises(ValueError, match="IC-02"):
            Server("t").add_resource("test://x", lambda: "", name="x", icons=icons)


@pytest.mark.req("RS-07")
@pytest.mark.parametrize(("uri", "ok"), [("myapp://x", True), ("file:///a", True), ("x+y.z-1:a", True),
                                         ("1abc://x", False), ("://x", False), ("no scheme", False)])
def test_resource_uris_start_with_an_rfc3986_scheme(uri: str, ok: bool) -> None:
    server = Server("t")
    if ok:
        server.add_resource(uri, lambda: "", name="x")
    else:
        with pytest.raises(ValueError, match="RS-07"):
            server.add_resource(uri, lambda: "", name="x")


@pytest.mark.asyncio
@pytest.mark.req("TL-03")
async def test_tools_list_order_is_deterministic(wire) -> None:
    server = Server("t")
    names = ["zeta", "alpha", "mid.dle", "beta-2"]
    for name in names:
        server.add_tool(name, lambda a: "", input_schema={"type": "object"})
    async with connect(server, wire) as h:
        first = [t["name"] for t in (await h.request("tools/list"))["tools"]]
        second = [t["name"] for t in (await h.request("tools/list"))["tools"]]
    assert first == second == names  # registration order, the same every time


@pytest.mark.asyncio
@pytest.mark.req("MT-01", "MT-04")
async def test_unknown_and_reserved_meta_keys_in_requests_change_nothing(wire) -> None:
    server = Server("t")

    @server.tool
    async def report(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        return "done"

    async with connect(server, wire) as h:
        meta = {"progressToken": "p1", "io.modelcontextprotocol/future": {"x": 1}, "com.example/trace": "t"}
        result = await h.request("tools/call", {"name": "report", "arguments": {}, "_meta": meta})
        assert result["content"] == [{"type": "text", "text": "done"}]
        [progress] = h.notifications_of("notifications/progress")
        assert progress["params"] == {"progressToken": "p1", "progress": 1, "total": 2}


@pytest.mark.asyncio
@pytest.mark.req("BP-08")
async def test_protocol_error_messages_are_one_short_sentence(wire) -> None:
    server = Server("t")
    server.add_tool("t", lambda a: "", input_schema={"type": "object"})
    bad = [
        ("nope/method", {}),
        ("tools/call", {"name": "missing"}),
        ("tools/call", {}),
        ("prompts/get", {"name": "missing"}),
        ("resources/read", {"uri": "test://missing"}),
        ("tools/list", {"cursor": "forged"}),
        ("logging/setLevel", {"level": "loud"}),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "missing"}, "argument": {"name": "a", "value": ""}}),
    ]
    async with connect(server, wire, "2025-06-18") as h:
        for method, params in bad:
            with pytest.raises(RpcError) as err:
                await h.request(method, params)
            message = err.value.message
            assert "\n" not in message and len(message) <= 200, message
            assert len(re.findall(r"[.!?](\s|$)", message)) <= 1, message


@pytest.mark.asyncio
@pytest.mark.req("CN-06")
async def test_cancellation_reasons_are_logged(wire, caplog) -> None:
    server = Server("t")

    @server.tool
    async def wait() -> str:
        await asyncio.sleep(30)
        return "late"

    caplog.set_level(logging.INFO, logger="mcpkit")
    async with connect(server, wire) as h:
        rid, fut = h.send_request("tools/call", {"name": "wait", "arguments": {}})
        await h.settle()
        h.cancel(rid, "user pressed stop")
        await h.eventually(lambda: "user pressed stop" in caplog.text)
        assert not fut.done()


@pytest.mark.asyncio
@pytest.mark.req("SA-03", "SA-04")
async def test_sampling_never_asks_for_included_context(wire) -> None:
    server = Server("t")

    @server.tool
    async def ask(ctx: Context) -> str:
        result = await ctx.sample("hello", max_tokens=10, system_prompt="be brief")
        return result["content"]["text"]

    async with connect(server, wire, capabilities={"sampling": {}}) as h:
        h.answer("sampling/createMessage", lambda params: {
            "role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m", "stopReason": "endTurn"})
        result = await h.request("tools/call", {"name": "ask", "arguments": {}})
        assert result["content"] == [{"type": "text", "text": "hi"}]
        [request] = h.server_requests
        params = request["params"]
        assert "includeContext" not in params
        assert params["messages"] == [{"role": "user", "content": {"type": "text", "text": "hello"}}]
        assert params["maxTokens"] == 10 and params["systemPrompt"] == "be brief"


@pytest.mark.asyncio
@pytest.mark.req("EL-04", "EL-01")
async def test_url_elicitation_sends_mode_message_url_and_id(wire) -> None:
    server = Server("t")

    @server.tool
    async def connect_account(ctx: Context) -> str:
        answer = await ctx.elicit_url("Sign in to the billing system", "https://example.com/connect?s=1", "el-1")
        return answer["action"]

    async with connect(server, wire, capabilities={"elicitation": {"form": {}, "url": {}}}) as h:
        h.answer("elicitation/create", lambda params: {"action": "accept"})
        result = await h.request("tools/call", {"name": "connect_account", "arguments": {}})
        assert result["content"] == [{"type": "text", "text": "accept"}]
        [request] = h.server_requests
        assert request["params"] == {
            "mode": "url", "message": "Sign in to the billing system",
            "url": "https://example.com/connect?s=1", "elicitationId": "el-1",
        }
    async with connect(server, wire, capabilities={"elicitation": {}}) as h:  # form only
        result = await h.request("tools/call", {"name": "connect_account", "arguments": {}})
        assert result["isError"] is True and "elicitation.url" in result["content"][0]["text"]
        assert h.server_requests == []


@pytest.mark.asyncio
@pytest.mark.req("LC-03")
async def test_no_request_to_the_client_before_it_is_initialized(wire) -> None:
    server = Server("t")

    @server.tool
    async def roots(ctx: Context) -> str:
        return str(await ctx.roots())

    async with connect(server, wire, None) as h:
        await h.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
                                       "clientInfo": {"name": "c", "version": "1"}})
        # notifications/initialized not sent yet
        result = await h.request("tools/call", {"name": "roots", "arguments": {}})
        assert result["isError"] is True
        assert "not finished initialization" in result["content"][0]["text"]
        assert h.server_requests == []


@pytest.mark.req("JS-03")
def test_supported_dialects_are_documented() -> None:
    text = (ROOT / "README.md").read_text()
    for dialect in SUPPORTED_DIALECTS:
        assert dialect in text, f"README does not name the supported dialect {dialect}"
