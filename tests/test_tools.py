"""tools/call end to end, in-process: handlers (sync and async), results and errors, Context
(progress, logging, requests to the client), content helpers and per-revision shaping."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import re
import threading
from typing import Annotated, Literal, TypedDict

import pytest

import mcpkit
from mcpkit import Context, Server, ToolError, ToolResult
from tests.harness import RpcError, connect

REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
PNG = b"\x89PNG\r\n\x1a\n\x00\x00binary\xff"
WAV = b"RIFF\x00\x00WAVEfmt "


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def call(h, name: str, arguments: dict | None = None, **kw) -> dict:
    params: dict = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return await h.request("tools/call", params, **kw)


def text_of(result: dict) -> str:
    assert len(result["content"]) == 1 and result["content"][0]["type"] == "text", result
    return result["content"][0]["text"]


@dataclasses.dataclass
class Contact:
    name: str
    age: int = 30
    subscribed: bool = False


class Counted(TypedDict):
    count: int


class Address(TypedDict):
    street: str
    zip: Annotated[str, "Postal code"]


# --------------------------------------------------------------------------- handlers


@pytest.mark.asyncio
@pytest.mark.req("TL-09")
async def test_sync_handlers_run_in_worker_threads_and_async_ones_on_the_loop(wire):
    server = Server("t")
    where: dict[str, str] = {}
    loop_thread = threading.current_thread().name

    @server.tool
    def sync_add(a: int, b: int) -> str:
        where["sync"] = threading.current_thread().name
        return str(a + b)

    @server.tool
    async def async_add(a: int, b: int) -> str:
        await asyncio.sleep(0)
        where["async"] = threading.current_thread().name
        return str(a + b)

    async with connect(server, wire) as h:
        assert await call(h, "sync_add", {"a": 1, "b": 2}) == {"content": [{"type": "text", "text": "3"}]}
        assert await call(h, "async_add", {"a": 2, "b": 2}) == {"content": [{"type": "text", "text": "4"}]}
    assert where["sync"].startswith("mcpkit-worker")
    assert where["async"] == loop_thread


@pytest.mark.asyncio
@pytest.mark.req("TL-09")
async def test_a_blocked_sync_handler_delays_neither_ping_nor_other_calls(wire):
    server = Server("t")
    release = threading.Event()

    @server.tool
    def blocker() -> str:
        assert release.wait(30)
        return "released"

    @server.tool
    def quick() -> str:
        return "quick"

    async with connect(server, wire) as h:
        _, blocked = h.send_request("tools/call", {"name": "blocker"})
        assert await h.request("ping") == {}
        assert text_of(await call(h, "quick")) == "quick"
        assert not blocked.done()
        release.set()
        assert text_of(await asyncio.wait_for(blocked, 10)) == "released"


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
@pytest.mark.parametrize("version", REVISIONS)
async def test_unknown_tool_is_invalid_params_in_every_revision(wire, version):
    server = Server("t")
    server.add_tool("known", lambda args: "", input_schema={"type": "object"})  # a server with tools
    async with connect(server, wire, version) as h:
        with pytest.raises(RpcError) as err:
            await call(h, "nope", {})
        assert (err.value.code, err.value.message, err.value.data) == (-32602, "Unknown tool: nope", {"name": "nope"})
        with pytest.raises(RpcError) as err:
            await h.request("tools/call", {"arguments": {}})
        assert err.value.code == -32602
        assert err.value.message == "tools/call needs a string 'name' parameter."


@pytest.mark.asyncio
@pytest.mark.req("TL-10", "TL-11")
@pytest.mark.parametrize("version", REVISIONS)
async def test_invalid_arguments_are_a_tool_error_from_2025_11_25_and_invalid_params_before(wire, version):
    server = Server("t")
    ran = []

    @server.tool
    def add(a: int, b: int = 1) -> str:
        ran.append((a, b))
        return str(a + b)

    cases = [
        ({"b": 2}, "Invalid arguments for tool 'add': (root): \"a\" is a required property",
         [{"path": "", "message": "\"a\" is a required property"}]),
        ({"a": "x"}, "Invalid arguments for tool 'add': /a: \"x\" is not of type \"integer\"",
         [{"path": "/a", "message": "\"x\" is not of type \"integer\""}]),
        ({"a": 1, "c": 3}, None, None),
        ({"a": 1.5}, None, None),
        ({"a": True}, None, None),
    ]
    async with connect(server, wire, version) as h:
        for arguments, message, errors in cases:
            if version == "2025-11-25":
                result = await call(h, "add", arguments)
                assert result["isError"] is True and len(result["content"]) == 1
                if message is not None:
                    assert text_of(result) == message
                else:
                    assert text_of(result).startswith("Invalid arguments for tool 'add': ")
            else:
                with pytest.raises(RpcError) as err:
                    await call(h, "add", arguments)
                assert err.value.code == -32602
                if message is not None:
                    assert err.value.message == message
                    assert err.value.data == {"errors": errors}
        # no arguments at all is an empty object: "a" is missing
        if version == "2025-11-25":
            assert (await call(h, "add"))["isError"] is True
        else:
            with pytest.raises(RpcError):
                await call(h, "add")
    assert ran == []


@pytest.mark.asyncio
@pytest.mark.req("TL-11")
async def test_coerce_is_opt_in(wire):
    server = Server("t")
    got = []

    @server.tool(coerce=True)
    def lenient(n: int, x: float = 0.0, flag: bool = False) -> str:
        got.append((n, x, flag))
        return f"{type(n).__name__}:{n}"

    @server.tool
    def strict(n: int) -> str:
        return str(n)

    async with connect(server, wire) as h:
        assert text_of(await call(h, "lenient", {"n": "5", "x": "2.5", "flag": "true"})) == "int:5"
        assert text_of(await call(h, "lenient", {"n": "-3"})) == "int:-3"
        assert text_of(await call(h, "lenient", {"n": 7})) == "int:7"
        for bad in ({"n": "five"}, {"n": "5.5"}, {"n": "5", "flag": "yes"}):
            assert (await call(h, "lenient", bad))["isError"] is True, bad
        strict_result = await call(h, "strict", {"n": "5"})
        assert strict_result["isError"] is True
        assert text_of(strict_result) == "Invalid arguments for tool 'strict': /n: \"5\" is not of type \"integer\""
    assert got == [(5, 2.5, True), (-3, 0.0, False), (7, 0.0, False)]


# --------------------------------------------------------------------------- errors


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
async def test_tool_error_text_reaches_the_client(wire):
    server = Server("t")

    @server.tool
    def refuse(why: str) -> str:
        raise ToolError(f"cannot do that: {why}")

    @server.tool
    async def refuse_async() -> int:
        raise ToolError("async refusal")

    @server.tool
    def empty_refusal() -> str:
        raise ToolError()

    def meta(message: str) -> dict:
        return {"dev.mcpkit/error": {"code": "E_INTERNAL", "message": message, "details": None, "retryable": False,
                                     "suggestedFix": None}}

    async with connect(server, wire) as h:
        assert await call(h, "refuse", {"why": "busy"}) == {
            "content": [{"type": "text", "text": "cannot do that: busy"}],
            "isError": True, "_meta": meta("cannot do that: busy"),
        }
        assert await call(h, "refuse_async") == {"content": [{"type": "text", "text": "async refusal"}],
                                                 "isError": True, "_meta": meta("async refusal")}
        assert await call(h, "empty_refusal") == {
            "content": [{"type": "text", "text": "Tool 'empty_refusal' failed."}],
            "isError": True, "_meta": meta(""),
        }


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
@pytest.mark.parametrize("middleware", [False, True], ids=["plain", "with-middleware"])
async def test_a_tool_errors_fix_and_code_reach_the_client_with_or_without_middleware(wire, middleware):
    """The model reads the fix in the text, a program the code in _meta: the same result whether
    a middleware runs around the call or not (docs/server.md, docs/policy.md)."""
    server = Server("t")
    if middleware:
        server.add_middleware(lambda cc, call_next: call_next(cc), hook="on_call_tool")

    @server.tool
    def forecast(city: str) -> str:
        raise ToolError(f"no forecast for {city}", code="E_NOT_FOUND", details={"city": city},
                        suggested_fix="Use one of: oslo, paris.")

    async with connect(server, wire) as h:
        assert await call(h, "forecast", {"city": "Rome"}) == {
            "content": [{"type": "text", "text": "no forecast for Rome Fix: Use one of: oslo, paris."}],
            "isError": True,
            "_meta": {"dev.mcpkit/error": {"code": "E_NOT_FOUND", "message": "no forecast for Rome",
                                           "details": {"city": "Rome"}, "retryable": False,
                                           "suggestedFix": "Use one of: oslo, paris."}},
        }


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_unexpected_exception_is_a_generic_tool_error_with_a_logged_correlation_id(wire, caplog, kind):
    server = Server("t")

    if kind == "sync":

        @server.tool
        def boom() -> str:
            raise RuntimeError("db password is hunter2")

    else:

        @server.tool
        async def boom() -> str:
            raise RuntimeError("db password is hunter2")

    caplog.set_level(logging.ERROR, logger="mcpkit")
    async with connect(server, wire) as h:
        result = await call(h, "boom")
    assert result["isError"] is True
    message = text_of(result)
    m = re.fullmatch(r"Internal error while running tool 'boom' \(correlation id ([0-9a-f]{16})\)\.", message)
    assert m, message
    assert "hunter2" not in json.dumps(result)
    records = [r for r in caplog.records if r.name == "mcpkit" and m.group(1) in r.getMessage()]
    assert len(records) == 1
    record = records[0]
    assert record.levelno == logging.ERROR
    assert record.getMessage() == f"tool 'boom' raised (correlation id {m.group(1)})"
    # the traceback goes to the log, with the exception's own text
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    assert "hunter2" in caplog.text and "Traceback" in caplog.text


@pytest.mark.asyncio
@pytest.mark.req("TL-07")
async def test_output_violating_the_output_schema_is_a_generic_error_with_details_in_the_log(wire, caplog):
    server = Server("t")

    @server.tool
    def wrong() -> Counted:
        return {"count": "SECRET-VALUE"}  # type: ignore[typeddict-item]

    def raw_handler(arguments):
        return {"total": -1}

    server.add_tool(
        "raw_wrong",
        raw_handler,
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"total": {"type": "integer", "minimum": 0}}},
    )

    @server.tool
    def result_wrong() -> Counted:
        # a ToolResult does not get around the outputSchema either
        return ToolResult("summary", structured={"count": "SECRET-VALUE"})

    caplog.set_level(logging.ERROR, logger="mcpkit")
    async with connect(server, wire) as h:
        for name in ("wrong", "raw_wrong", "result_wrong"):
            result = await call(h, name)
            assert result["isError"] is True and "structuredContent" not in result
            m = re.fullmatch(
                rf"Tool '{name}' produced output that does not match its outputSchema \(correlation id ([0-9a-f]+)\)\.",
                text_of(result),
            )
            assert m, result
            logged = [r.getMessage() for r in caplog.records if m.group(1) in r.getMessage()]
            assert len(logged) == 1
            assert "does not match its outputSchema" in logged[0]
    assert "SECRET-VALUE" not in json.dumps(h.received)
    assert "SECRET-VALUE" in caplog.text
    assert "-1 is less than the minimum of 0" in caplog.text


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
async def test_mcp_error_raised_by_a_handler_is_a_protocol_error(wire):
    server = Server("t")

    @server.tool
    def protocol() -> str:
        raise mcpkit.McpError(-32602, "Bad cursor-like thing.", {"why": "test"})

    async with connect(server, wire) as h:
        with pytest.raises(RpcError) as err:
            await call(h, "protocol")
    assert (err.value.code, err.value.message, err.value.data) == (-32602, "Bad cursor-like thing.", {"why": "test"})


# --------------------------------------------------------------------------- results


@pytest.mark.asyncio
@pytest.mark.req("TL-07", "TL-08", "TL-09")
async def test_structured_results_carry_a_text_copy(wire):
    server = Server("t")

    @server.tool
    def number() -> int:
        return 42

    @server.tool
    def maybe() -> str | None:
        return None

    @server.tool
    def contact() -> Contact:
        return Contact("Ann", 41)

    @server.tool
    def mapping() -> dict[str, int]:
        return {"b": 2, "a": 1}

    @server.tool
    def words() -> list[str]:
        return ["x", "y"]

    @server.tool
    def literal() -> Literal["on", "off"]:
        return "on"

    expected = {
        "number": {"result": 42},
        "contact": {"name": "Ann", "age": 41, "subscribed": False},
        "mapping": {"b": 2, "a": 1},
        "words": {"result": ["x", "y"]},
        "literal": {"result": "on"},
    }
    async with connect(server, wire) as h:
        for name, structured in expected.items():
            result = await call(h, name)
            assert set(result) == {"content", "structuredContent"}, name
            assert result["structuredContent"] == structured
            # TL-08: the same JSON as a text block
            assert json.loads(text_of(result)) == structured
        assert await call(h, "maybe") == {"content": []}


@pytest.mark.asyncio
@pytest.mark.req("TL-09", "PM-04")
async def test_content_helpers_make_the_wire_shapes(wire):
    server = Server("t")

    @server.tool
    def one_text():
        return mcpkit.text("hello", annotations={"audience": ["user"], "priority": 0.9})

    @server.tool
    def picture():
        return mcpkit.image(PNG)

    @server.tool
    def picture_b64():
        return mcpkit.image(b64(PNG), "image/jpeg")

    @server.tool
    def sound():
        return mcpkit.audio(WAV)

    @server.tool
    def embedded():
        return [
            mcpkit.resource("res://a", text="inline", mime_type="text/plain"),
            mcpkit.resource("res://b", blob=PNG, mime_type="image/png"),
        ]

    @server.tool
    def link():
        return mcpkit.resource_link("res://doc", "doc", title="Doc", description="A doc", mime_type="text/plain", size=5)

    @server.tool
    def mixed():
        return ["first", mcpkit.text("second"), mcpkit.image(PNG)]

    @server.tool
    def failed():
        return ToolResult(["went wrong", mcpkit.text("details")], is_error=True, meta={"com.example/x": 1})

    @server.tool
    def structured_result():
        return ToolResult("summary", structured={"k": 1})

    @server.tool
    def nothing() -> None:
        return None

    @server.tool
    def unannotated_dict():
        return {"a": [1, 2]}

    expected = {
        "one_text": {"content": [{"type": "text", "text": "hello", "annotations": {"audience": ["user"], "priority": 0.9}}]},
        "picture": {"content": [{"type": "image", "data": b64(PNG), "mimeType": "image/png"}]},
        "picture_b64": {"content": [{"type": "image", "data": b64(PNG), "mimeType": "image/jpeg"}]},
        "sound": {"content": [{"type": "audio", "data": b64(WAV), "mimeType": "audio/wav"}]},
        "embedded": {"content": [
            {"type": "resource", "resource": {"uri": "res://a", "mimeType": "text/plain", "text": "inline"}},
            {"type": "resource", "resource": {"uri": "res://b", "mimeType": "image/png", "blob": b64(PNG)}},
        ]},
        "link": {"content": [{"type": "resource_link", "uri": "res://doc", "name": "doc", "title": "Doc",
                              "description": "A doc", "mimeType": "text/plain", "size": 5}]},
        "mixed": {"content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"},
                              {"type": "image", "data": b64(PNG), "mimeType": "image/png"}]},
        "failed": {"content": [{"type": "text", "text": "went wrong"}, {"type": "text", "text": "details"}],
                   "isError": True, "_meta": {"com.example/x": 1}},
        "structured_result": {"content": [{"type": "text", "text": "summary"}], "structuredContent": {"k": 1}},
        "nothing": {"content": []},
        "unannotated_dict": {"content": [{"type": "text", "text": '{"a":[1,2]}'}]},
    }
    async with connect(server, wire) as h:
        for name, want in expected.items():
            assert await call(h, name) == want, name
    assert base64.b64decode(expected["picture"]["content"][0]["data"]) == PNG


@pytest.mark.asyncio
@pytest.mark.req("TL-09")
async def test_content_blocks_among_strings_are_content_whatever_the_annotation(wire):
    """A bare ``-> list`` (or ``list[Any]``) declares structured output, yet a list of content
    blocks with captions is meant as content: the blocks were sent as JSON text, the image lost.
    Strings alone stay the data the annotation declared."""
    server = Server("t")

    @server.tool
    def chart() -> list:
        return ["Temperatures this week:", mcpkit.image(PNG)]

    @server.tool
    def names() -> list:
        return ["oslo", "paris"]

    async with connect(server, wire) as h:
        assert await call(h, "chart") == {"content": [
            {"type": "text", "text": "Temperatures this week:"},
            {"type": "image", "data": b64(PNG), "mimeType": "image/png"}]}
        assert (await call(h, "names"))["structuredContent"] == {"result": ["oslo", "paris"]}


def test_resource_helper_takes_exactly_one_of_text_or_blob():
    with pytest.raises(ValueError, match="exactly one"):
        mcpkit.resource("res://x")
    with pytest.raises(ValueError, match="exactly one"):
        mcpkit.resource("res://x", text="a", blob=b"b")


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
async def test_returning_bytes_is_an_internal_error_not_a_crash(wire, caplog):
    server = Server("t")

    @server.tool
    def raw_bytes():
        return b"\x00\x01"

    async with connect(server, wire) as h:
        result = await call(h, "raw_bytes")
        assert result["isError"] is True
        assert text_of(result).startswith("Internal error while running tool 'raw_bytes' (correlation id ")
        assert await h.request("ping") == {}
    assert "wrap them in mcpkit.image(), audio() or resource()" in caplog.text


@pytest.mark.asyncio
@pytest.mark.req("TL-07", "TL-09")
async def test_raw_tool_results_pass_through_and_structured_content_is_checked(wire):
    server = Server("t")
    out_schema = {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}
    server.add_tool("whole", lambda a: {"content": [{"type": "text", "text": "t"}], "structuredContent": {"v": a["v"]}},
                    input_schema={"type": "object"}, output_schema=out_schema)
    server.add_tool("value", lambda a: {"v": 3}, input_schema={"type": "object"}, output_schema=out_schema)
    server.add_tool("ctx_aware", lambda a, ctx: f"{ctx.method} {a['x']}", input_schema={"type": "object"})
    async with connect(server, wire) as h:
        assert await call(h, "whole", {"v": 1}) == {"content": [{"type": "text", "text": "t"}], "structuredContent": {"v": 1}}
        assert (await call(h, "whole", {"v": "x"}))["isError"] is True
        assert await call(h, "value") == {"content": [{"type": "text", "text": '{"v":3}'}], "structuredContent": {"v": 3}}
        assert text_of(await call(h, "ctx_aware", {"x": 1})) == "tools/call 1"


# --------------------------------------------------------------------------- per revision


def _content_server() -> Server:
    server = Server("t")

    @server.tool
    def sound():
        return [mcpkit.audio(WAV, "audio/wav"), mcpkit.text("caption")]

    @server.tool
    def link():
        return mcpkit.resource_link("res://doc", "doc", title="The Doc")

    @server.tool
    def number() -> int:
        return 7

    return server


@pytest.mark.asyncio
@pytest.mark.req("TL-07", "TL-09", "LC-05")
@pytest.mark.parametrize("version", REVISIONS)
async def test_results_are_shaped_per_revision(wire, version):
    server = _content_server()
    async with connect(server, wire, version) as h:
        sound = await call(h, "sound")
        link = await call(h, "link")
        number = await call(h, "number")
    audio = {"type": "audio", "data": b64(WAV), "mimeType": "audio/wav"}
    caption = {"type": "text", "text": "caption"}
    link_block = {"type": "resource_link", "uri": "res://doc", "name": "doc", "title": "The Doc"}
    link_text = {"type": "text", "text": "Resource link: The Doc <res://doc>"}
    if version == "2024-11-05":
        notice = {"type": "text", "text": "[audio content (audio/wav) omitted: not supported by protocol 2024-11-05]"}
        assert sound == {"content": [notice, caption]}
        assert link == {"content": [link_text]}
    elif version == "2025-03-26":
        assert sound == {"content": [audio, caption]}
        assert link == {"content": [link_text]}
    else:
        assert sound == {"content": [audio, caption]}
        assert link == {"content": [link_block]}
    if version in ("2024-11-05", "2025-03-26"):
        # no structuredContent before 2025-06-18; the text copy is what these clients read
        assert number == {"content": [{"type": "text", "text": '{"result":7}'}]}
    else:
        assert number == {"content": [{"type": "text", "text": '{"result":7}'}], "structuredContent": {"result": 7}}


@pytest.mark.asyncio
@pytest.mark.req("TL-09", "LC-05")
@pytest.mark.parametrize(
    "version",
    [
        "2024-11-05",
        "2025-03-26",
        "2025-11-25",
    ],
)
async def test_content_annotations_are_kept_where_the_revision_defines_them(wire, version):
    server = Server("t")

    @server.tool
    def annotated():
        return mcpkit.text("caption", annotations={"audience": ["user"], "priority": 1.0})

    async with connect(server, wire, version) as h:
        result = await call(h, "annotated")
    assert result == {"content": [{"type": "text", "text": "caption",
                                   "annotations": {"audience": ["user"], "priority": 1.0}}]}


# --------------------------------------------------------------------------- Context: progress and log


@pytest.mark.asyncio
@pytest.mark.req("LG-01", "LG-02", "LG-04")
async def test_log_messages_follow_set_level(wire):
    server = Server("t")  # default threshold: info

    @server.tool
    async def chatty(ctx: Context) -> str:
        await ctx.debug("d")
        await ctx.info({"step": 1}, logger="app")
        ctx.log("notice", "n")
        ctx.warning("w")
        ctx.error("e")
        for level in ("critical", "alert", "emergency"):
            ctx.log(level, level)
        return "done"

    def levels(h):
        return [(n["params"]["level"], n["params"]["data"]) for n in h.notifications_of("notifications/message")]

    async with connect(server, wire) as h:
        assert text_of(await call(h, "chatty")) == "done"
        await h.settle()
        assert levels(h) == [("info", {"step": 1}), ("notice", "n"), ("warning", "w"), ("error", "e"),
                             ("critical", "critical"), ("alert", "alert"), ("emergency", "emergency")]
        info = h.notifications_of("notifications/message")[0]
        assert info["params"] == {"level": "info", "data": {"step": 1}, "logger": "app"}
        assert "logger" not in h.notifications_of("notifications/message")[1]["params"]

        assert await h.request("logging/setLevel", {"level": "warning"}) == {}
        h.notifications.clear()
        await call(h, "chatty")
        await h.settle()
        assert [lv for lv, _ in levels(h)] == ["warning", "error", "critical", "alert", "emergency"]

        assert await h.request("logging/setLevel", {"level": "debug"}) == {}
        h.notifications.clear()
        await call(h, "chatty")
        await h.settle()
        assert [lv for lv, _ in levels(h)] == [
            "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]

        for bad in ("verbose", "WARNING", None, 3):
            with pytest.raises(RpcError) as err:
                await h.request("logging/setLevel", {"level": bad})
            assert err.value.code == -32602
        assert err.value.message.startswith("Unknown log level 3; use one of: debug, info, notice")


@pytest.mark.asyncio
@pytest.mark.req("LG-02", "LG-04")
async def test_sync_handlers_log_too_and_unknown_levels_fail_the_tool(wire):
    server = Server("t", log_level="warning")

    @server.tool
    def sync_logger(ctx: Context) -> str:
        ctx.info("filtered out by the server default")
        ctx.warning("kept")
        return "ok"

    @server.tool
    def bad_level(ctx: Context) -> str:
        ctx.log("verbose", "x")
        return "unreachable"

    async with connect(server, wire) as h:
        assert text_of(await call(h, "sync_logger")) == "ok"
        await h.settle()
        assert [n["params"] for n in h.notifications_of("notifications/message")] == [
            {"level": "warning", "data": "kept"}]
        result = await call(h, "bad_level")
        assert result["isError"] is True
        assert text_of(result).startswith("Internal error while running tool 'bad_level'")


def test_a_log_call_in_fastmcps_order_is_refused_naming_the_order():
    """FastMCP's ``ctx.log(message, level)`` puts the message where mcpkit takes the level:
    the error says which comes first and the shorter spelling."""
    ctx = Context.__new__(Context)  # the check runs before anything of the request is read
    with pytest.raises(ValueError) as err:
        ctx.log("disk almost full", "warning")
    assert str(err.value) == ("unknown log level 'disk almost full'; use one of debug, info, notice, warning, "
                              "error, critical, alert, emergency: the level comes first, ctx.log('info', data), "
                              "or use ctx.info(data)")


@pytest.mark.asyncio
@pytest.mark.req("LC-05", "PR-01", "PR-02", "PR-03", "PR-04")
@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25"])
async def test_progress_goes_out_only_with_a_token_and_fits_the_revision(wire, version):
    server = Server("t")

    @server.tool
    async def work(ctx: Context) -> str:
        await ctx.report_progress(1, 3, "one")
        await ctx.report_progress(2.5, 3)
        return f"token={ctx.progress_token}"

    @server.tool
    def sync_work(ctx: Context) -> str:
        ctx.report_progress(1)
        ctx.report_progress(1)  # not increasing: dropped, with a warning in the log
        return "ok"

    async with connect(server, wire, version) as h:
        assert text_of(await call(h, "work")) == "token=None"
        await h.settle()
        assert h.notifications_of("notifications/progress") == []

        assert text_of(await call(h, "work", progress_token="tok-1")) == "token=tok-1"
        assert text_of(await call(h, "sync_work", progress_token=7)) == "ok"
        await h.settle()
        first = {"progressToken": "tok-1", "progress": 1, "total": 3}
        if version != "2024-11-05":  # no progress message in 2024-11-05
            first["message"] = "one"
        assert [n["params"] for n in h.notifications_of("notifications/progress")] == [
            first,
            {"progressToken": "tok-1", "progress": 2.5, "total": 3},
            {"progressToken": 7, "progress": 1},
        ]
        # progress never comes after the response of its request (PR-04)
        h.received.clear()
        rid, fut = h.send_request("tools/call", {"name": "work"}, progress_token="tok-2")
        await fut
        kinds = [m.get("method") or m.get("id") for m in h.received]
        assert kinds == ["notifications/progress", "notifications/progress", rid]


@pytest.mark.asyncio
@pytest.mark.req("PR-04")
async def test_no_progress_after_the_response(wire):
    server = Server("t")
    kept: list[Context] = []

    @server.tool
    async def quick(ctx: Context) -> str:
        kept.append(ctx)
        await ctx.report_progress(1)
        return "done"

    async with connect(server, wire) as h:
        assert text_of(await call(h, "quick", progress_token="p")) == "done"
        kept[0].report_progress(2)  # the request is over: nothing may go out for it
        await h.request("ping")
        await h.settle()
        assert [n["params"]["progress"] for n in h.notifications_of("notifications/progress")] == [1]


@pytest.mark.asyncio
@pytest.mark.req("CN-01")
async def test_cancelled_requests_stop_and_get_no_response(wire):
    server = Server("t")
    started = asyncio.Event()
    outcome: list[str] = []
    sync_started = threading.Event()

    @server.tool
    async def waits() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            outcome.append("async cancelled")
            raise
        return "finished"

    @server.tool
    def polls(ctx: Context) -> str:
        sync_started.set()
        if ctx.cancelled.wait(30):
            outcome.append("sync saw the cancel")
        return "ignored answer"

    async with connect(server, wire) as h:
        rid, fut = h.send_request("tools/call", {"name": "waits"})
        await started.wait()
        h.cancel(rid, "user pressed stop")
        sid, sfut = h.send_request("tools/call", {"name": "polls"})
        await asyncio.get_running_loop().run_in_executor(None, sync_started.wait, 10)
        h.cancel(sid)
        await h.eventually(lambda: len(outcome) == 2)
        # a cancel for an unknown or finished request is ignored
        h.cancel(12345)
        assert await h.request("ping") == {}
        await asyncio.sleep(0.05)
        await h.settle()
        assert not fut.done() and not sfut.done()
        assert [m for m in h.received if m.get("id") in (rid, sid)] == []
    assert sorted(outcome) == ["async cancelled", "sync saw the cancel"]


@pytest.mark.asyncio
@pytest.mark.req("CN-01", "BP-04")
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_the_id_of_a_cancelled_request_still_running_is_refused_until_its_handler_ends(wire, kind):
    """The engine forgets a cancelled request (CN-01), but a handler that ignores the cancel
    runs on under that id. A new request reusing the id (BP-04 forbids it; a client may still)
    was handed the old request's Context (its request, its token) and answered with the old
    handler's result. It is refused until the old handler ends; then the id serves again."""
    server = Server("t")
    started, go = threading.Event(), threading.Event()
    contexts: list[Context] = []

    if kind == "sync":
        @server.tool
        def slow(ctx: Context) -> str:
            contexts.append(ctx)
            started.set()
            go.wait(10)
            return "the cancelled call's result"
    else:
        @server.tool
        async def slow(ctx: Context) -> str:
            contexts.append(ctx)
            started.set()
            while not go.is_set():  # a handler that swallows its cancellation
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    continue
            return "the cancelled call's result"

    @server.tool
    def mine(ctx: Context) -> str:
        contexts.append(ctx)
        return "mine"

    async with connect(server, wire) as h:
        h.send_request("tools/call", {"name": "slow"}, id=7)
        assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        h.cancel(7)
        _, reused = h.send_request("tools/call", {"name": "mine"}, id=7)
        with pytest.raises(RpcError) as refused:
            await asyncio.wait_for(reused, 10)
        assert refused.value.code == -32600 and "cancelled" in refused.value.message
        assert len(contexts) == 1  # "mine" never ran
        go.set()
        await h.eventually(lambda: not h.session._abandoned)
        await h.settle()
        _, again = h.send_request("tools/call", {"name": "mine"}, id=7)
        assert (await asyncio.wait_for(again, 10))["content"] == [{"type": "text", "text": "mine"}]
        assert len(contexts) == 2 and contexts[1] is not contexts[0]
        assert not [m for m in h.received if "the cancelled call's result" in json.dumps(m)]


@pytest.mark.asyncio
@pytest.mark.req("BP-09", "RT-02")
async def test_client_notifications_reach_their_handlers_and_get_no_response(wire):
    server = Server("t")
    seen: list[tuple[str, dict]] = []
    done = asyncio.Event()

    @server.on_notification("notifications/roots/list_changed")
    def roots_changed(params):
        seen.append(("sync", params))

    @server.on_notification("notifications/com.example/ping")
    async def custom(params):
        seen.append(("async", params))
        done.set()

    async with connect(server, wire) as h:
        h.received.clear()
        h.notify("notifications/roots/list_changed")
        h.notify("notifications/com.example/ping", {"n": 1})
        h.notify("notifications/unknown/thing", {"x": 1})
        await asyncio.wait_for(done.wait(), 10)
        assert await h.request("ping") == {}
        await h.settle()
        assert h.received == [{"jsonrpc": "2.0", "id": h._next_id, "result": {}}]
    assert seen == [("sync", {}), ("async", {"n": 1})]


# --------------------------------------------------------------------------- Context: requests to the client


@pytest.mark.asyncio
@pytest.mark.req("SA-01", "EL-01", "RT-01", "LC-05")
async def test_requests_to_the_client_need_its_declared_capability(wire):
    server = Server("t")

    @server.tool
    async def sample(ctx: Context) -> str:
        return str(await ctx.sample("hi"))

    @server.tool
    async def elicit(ctx: Context) -> str:
        return str(await ctx.elicit("Name?", {"type": "object", "properties": {"n": {"type": "string"}}}))

    @server.tool
    def roots(ctx: Context) -> str:
        return str(ctx.roots())

    async with connect(server, wire, capabilities={}) as h:
        for name, cap in (("sample", "sampling"), ("elicit", "elicitation"), ("roots", "roots")):
            result = await call(h, name)
            assert result == {
                "content": [{"type": "text", "text": f"the client did not declare the '{cap}' capability, "
                                                     "so this server cannot ask it for that"}],
                "isError": True,
            }
        await h.settle()
        assert h.server_requests == []

    # elicitation does not exist before 2025-06-18, whatever the client declares
    async with connect(server, wire, "2025-03-26", capabilities={"elicitation": {}}) as h:
        result = await call(h, "elicit")
        assert result == {
            "content": [{"type": "text", "text": "elicitation does not exist in protocol 2025-03-26"}],
            "isError": True,
        }
        assert h.server_requests == []


@pytest.mark.asyncio
@pytest.mark.req("SA-01", "SA-02")
async def test_sampling_sends_the_request_and_returns_the_answer(wire):
    server = Server("t")

    @server.tool
    async def ask(question: str, ctx: Context) -> str:
        answer = await ctx.sample(question, max_tokens=50, system_prompt="Be brief.", temperature=0.2,
                                  stop_sequences=["\n"], model_preferences={"hints": [{"name": "small"}]})
        return answer["content"]["text"]

    @server.tool
    async def with_tools(ctx: Context) -> str:
        await ctx.sample("x", tools=[{"name": "t", "inputSchema": {"type": "object"}}])
        return "sent"

    seen = []

    def on_sample(params):
        seen.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m-1",
                "stopReason": "endTurn"}

    async with connect(server, wire, capabilities={"sampling": {}}, answers={"sampling/createMessage": on_sample}) as h:
        assert await call(h, "ask", {"question": "Capital of France?"}) == {"content": [{"type": "text", "text": "Paris"}]}
        # SA-02: tools in sampling need sampling.tools
        refused = await call(h, "with_tools")
        assert refused["isError"] is True
        assert text_of(refused) == ("the client did not declare the 'sampling.tools' capability, "
                                    "so this server cannot ask it for that")
    assert seen == [{
        "messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
        "maxTokens": 50,
        "systemPrompt": "Be brief.",
        "temperature": 0.2,
        "stopSequences": ["\n"],
        "modelPreferences": {"hints": [{"name": "small"}]},
    }]
    async with connect(server, wire, "2025-06-18", capabilities={"sampling": {"tools": {}}}) as h:
        refused = await call(h, "with_tools")
        assert text_of(refused) == "tools in sampling need protocol 2025-11-25 or later (SA-02)"
        assert h.server_requests == []


@pytest.mark.asyncio
@pytest.mark.req("SA-01")
async def test_a_client_error_answer_becomes_a_tool_error(wire):
    server = Server("t")

    @server.tool
    async def ask(ctx: Context) -> str:
        return str(await ctx.sample("hi"))

    def reject(params):
        raise RpcError(-1, "User rejected sampling request")

    async with connect(server, wire, capabilities={"sampling": {}}, answers={"sampling/createMessage": reject}) as h:
        result = await call(h, "ask")
    assert result["isError"] is True
    assert "User rejected sampling request" in text_of(result)


@pytest.mark.asyncio
@pytest.mark.req("EL-01", "EL-02")
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_elicit_with_a_type_builds_the_requested_schema(wire, version):
    server = Server("t")

    @server.tool
    async def contact(ctx: Context) -> str:
        answer = await ctx.elicit("Who are you?", Contact)
        return f"{answer['action']}:{answer.get('content')}"

    @server.tool
    def address(ctx: Context) -> str:  # sync: blocks its worker thread, not the loop
        answer = ctx.elicit("Where?", Address)
        return answer["action"]

    requests = []

    def on_elicit(params):
        requests.append(params)
        if params["message"] == "Who are you?":
            return {"action": "accept", "content": {"name": "Ann", "age": 41, "subscribed": True}}
        return {"action": "decline"}

    async with connect(server, wire, version, capabilities={"elicitation": {}},
                       answers={"elicitation/create": on_elicit}) as h:
        assert text_of(await call(h, "contact")) == "accept:{'name': 'Ann', 'age': 41, 'subscribed': True}"
        assert text_of(await call(h, "address")) == "decline"
    mode = {"mode": "form"} if version == "2025-11-25" else {}
    assert requests == [
        {
            "message": "Who are you?",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer", "default": 30},
                    "subscribed": {"type": "boolean", "default": False},
                },
                "required": ["name"],
                "additionalProperties": False,
            },
            **mode,
        },
        {
            "message": "Where?",
            "requestedSchema": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "zip": {"type": "string", "description": "Postal code"}},
                "required": ["street", "zip"],
            },
            **mode,
        },
    ]


@pytest.mark.asyncio
@pytest.mark.req("RT-01")
async def test_roots_from_sync_and_async_handlers(wire):
    server = Server("t")

    @server.tool
    def sync_roots(ctx: Context) -> str:
        return ",".join(r["uri"] for r in ctx.roots()["roots"])

    @server.tool
    async def async_roots(ctx: Context) -> str:
        return ",".join(r.get("name", "") for r in (await ctx.roots())["roots"])

    roots = {"roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///b", "name": "B"}]}
    async with connect(server, wire, capabilities={"roots": {"listChanged": True}},
                       answers={"roots/list": lambda params: roots}) as h:
        assert text_of(await call(h, "sync_roots")) == "file:///a,file:///b"
        assert text_of(await call(h, "async_roots")) == "A,B"
        assert [r["method"] for r in h.server_requests] == ["roots/list", "roots/list"]
        assert all("params" not in r for r in h.server_requests)
        # ids of server requests are never reused
        assert len({r["id"] for r in h.server_requests}) == 2


@pytest.mark.asyncio
@pytest.mark.req("LC-10", "SA-01")
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_unanswered_client_request_times_out_and_is_cancelled(wire, kind):
    server = Server("t")

    if kind == "async":

        @server.tool
        async def ask(ctx: Context) -> str:
            return str(await ctx.sample("hi", timeout=0.2))

    else:

        @server.tool
        def ask(ctx: Context) -> str:
            return str(ctx.sample("hi", timeout=0.2))

    async with connect(server, wire, capabilities={"sampling": {}}) as h:  # never answers
        result = await call(h, "ask")
        assert result == {
            "content": [{"type": "text", "text": "the client did not answer sampling/createMessage within 0.2 s"}],
            "isError": True,
        }
        [request] = h.server_requests
        [cancelled] = await h.wait_notification("notifications/cancelled")
        assert cancelled["params"] == {"requestId": request["id"], "reason": "no longer needed"}
        # the cancellation went out before the tool's result
        order = [m.get("method") or ("result" if "result" in m else "error") for m in h.received]
        assert order.index("notifications/cancelled") < order.index("result", order.index("sampling/createMessage"))
        # a late answer is ignored, and the session goes on
        h.feed({"jsonrpc": "2.0", "id": request["id"], "result": {"role": "assistant", "model": "m",
                                                                  "content": {"type": "text", "text": "late"}}})
        assert await h.request("ping") == {}


@pytest.mark.asyncio
@pytest.mark.req("LC-10")
async def test_server_default_client_request_timeout_applies(wire):
    server = Server("t", client_request_timeout=0.2)

    @server.tool
    async def roots(ctx: Context) -> str:
        return str(await ctx.roots())

    async with connect(server, wire, capabilities={"roots": {}}) as h:
        result = await call(h, "roots")
        assert text_of(result) == "the client did not answer roots/list within 0.2 s"
        await h.wait_notification("notifications/cancelled")


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
async def test_a_timeout_inside_the_tool_is_an_internal_error(wire):
    server = Server("t")

    @server.tool
    def connect_db() -> str:
        raise TimeoutError("connect to db.internal:5432 timed out")

    async with connect(server, wire) as h:
        result = await call(h, "connect_db")
    assert result["isError"] is True
    assert "db.internal" not in text_of(result)
    assert text_of(result).startswith("Internal error while running tool 'connect_db' (correlation id ")


@pytest.mark.asyncio
@pytest.mark.req("TL-10")
async def test_an_unencodable_result_still_gets_an_answer(wire):
    server = Server("t")
    server.add_tool("raw", lambda a: {"content": [{"type": "text", "text": "x"}], "_meta": {"k": object()}},
                    input_schema={"type": "object"})
    async with connect(server, wire) as h:
        with pytest.raises(RpcError) as err:
            await call(h, "raw", timeout=2)
    assert err.value.code == -32603


@pytest.mark.asyncio
@pytest.mark.parametrize("policed", [False, True], ids=["plain", "policed"])
async def test_an_unknown_name_of_megabytes_is_not_echoed_back_whole(wire, policed, tmp_path):
    # a refusal is never larger than what it refuses: the name or URI is cut in the message and data
    from mcpkit.policy import Policy

    server = Server("t", policy=Policy() if policed else None)  # the refusal then runs the pipeline
    server.add_tool("known", lambda args: "", input_schema={"type": "object"}, read_only=True, open_world=False)

    @server.prompt()
    def greet(who: str) -> str:
        return f"hello {who}"

    @server.resource("mem://a")
    def a() -> str:
        return "a"

    huge = "x" * 1_000_000
    async with connect(server, wire) as h:
        refusals = []
        for method, params in (
            ("tools/call", {"name": huge, "arguments": {}}),
            ("prompts/get", {"name": huge}),
            ("resources/read", {"uri": "mem://" + huge}),
            ("completion/complete", {"ref": {"type": "ref/prompt", "name": huge},
                                     "argument": {"name": "who", "value": ""}}),
            ("completion/complete", {"ref": {"type": "ref/resource", "uri": huge},
                                     "argument": {"name": "x", "value": ""}}),
            (huge, {}),
        ):
            with pytest.raises(RpcError) as err:
                await h.request(method, params)
            refusals.append(err.value)
        for refused in refusals:
            assert len(json.dumps([refused.message, refused.data])) < 2_000, refused.message[:80]
            assert "(1000000 characters)" in refused.message or "(1000006 characters)" in refused.message
        assert await h.request("ping") == {}
