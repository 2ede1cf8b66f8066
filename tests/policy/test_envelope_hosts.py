"""The tool contract's envelope as hosts see it: the whole envelope in the text content, real
content blocks beside it, ToolResult under the contract, and no terminal escapes anywhere."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from mcpkit import Server, ToolError, ToolResult, image, text
from mcpkit.policy import Gates, Policy
from mcpkit.policy.chain import CID_META_KEY
from mcpkit.policy.limits import Limits, strip_structured
from tests.harness import connect
from tests.policy.test_chain import LATEST_HANDSHAKE, MemoryAudit, call

PNG = b"\x89PNG\r\n\x1a\nfake"


def add_result_tools(server: Server) -> None:
    """Tools answering a structured value, a ToolResult with content blocks, structured content
    and _meta, and a ToolResult that is an error."""

    @server.tool(read_only=True, open_world=False)
    def weather(city: str) -> dict[str, Any]:
        return {"city": city, "highs": [21.5, 23.0]}

    @server.tool(read_only=True, open_world=False)
    def full() -> ToolResult:
        return ToolResult([text("two nodes"), image(PNG)], structured={"nodes": 2}, meta={"dev.example/k": "v"})

    @server.tool(read_only=True, open_world=False)
    def refuses() -> ToolResult:
        return ToolResult("the editor is busy", is_error=True)


def make(sanitize: bool = False) -> tuple[Server, MemoryAudit]:
    audit = MemoryAudit()
    server = Server("e", policy=Policy(gates=Gates(), contract=True, audit=audit,
                                       limits=Limits(sanitize=sanitize) if sanitize else None))
    add_result_tools(server)

    @server.tool(read_only=True, open_world=False)
    def snapshot() -> list[Any]:
        return [text("the scene"), image(PNG, "image/png")]

    @server.tool(read_only=True, open_world=False)
    def colored() -> dict[str, Any]:
        return {"name": "\x1b[31mred\x1b[0m", "list": ["ok", "\x1b]0;title\x07x"]}

    return server, audit


@pytest.mark.req("TL-08")
@pytest.mark.asyncio
async def test_a_content_only_client_reads_the_whole_envelope_from_text(wire):
    server, _ = make()
    # 2025-03-26 has no structuredContent at all: the text is all such a client gets
    async with connect(server, wire, "2025-03-26") as c:
        old = await call(c, "weather", {"city": "Oslo"})
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        new = await call(c, "weather", {"city": "Oslo"})
        schema = {t["name"]: t for t in (await c.request("tools/list", {}))["tools"]}["weather"]["outputSchema"]
    assert "structuredContent" not in old
    (block,) = old["content"]
    env = json.loads(block["text"])
    assert env["ok"] is True and env["result"] == {"city": "Oslo", "highs": [21.5, 23.0]}
    assert env["meta"]["tool"] == "weather" and env["meta"]["correlationId"] == old["_meta"][CID_META_KEY]
    (block,) = new["content"]
    assert json.loads(block["text"]) == new["structuredContent"]
    jsonschema.validate(new["structuredContent"], schema)


@pytest.mark.req("TL-09")
@pytest.mark.asyncio
async def test_an_image_survives_the_contract_as_a_real_content_block(wire):
    server, _ = make()
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "snapshot")
    envelope_text, picture = result["content"]
    assert picture == {"type": "image", "data": "iVBORw0KGgpmYWtl", "mimeType": "image/png"}
    env = json.loads(envelope_text["text"])
    assert env == result["structuredContent"] and env["result"] == "the scene"
    assert "iVBORw0KGgpmYWtl" not in envelope_text["text"]  # never base64 inside the JSON


@pytest.mark.asyncio
async def test_tool_result_works_under_the_contract(wire):
    server, audit = make()
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        ok = await call(c, "full")
        failed = await call(c, "refuses")
    assert ok["structuredContent"]["result"] == {"nodes": 2}
    assert ok["content"][1]["type"] == "image"
    assert ok["_meta"]["dev.example/k"] == "v" and CID_META_KEY in ok["_meta"]
    assert failed["isError"] is True
    error = failed["structuredContent"]["error"]
    assert error["code"] == "E_TOOL_FAILED" and error["message"] == "the editor is busy"
    assert [(a["tool"], a["outcome"], a["code"]) for a in audit.lines] == [
        ("full", "ok", None), ("refuses", "error", "E_TOOL_FAILED")]


@pytest.mark.asyncio
async def test_terminal_escapes_are_stripped_from_structured_content_strings(wire):
    server, _ = make(sanitize=True)
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "colored")
    assert result["structuredContent"]["result"] == {"name": "red", "list": ["ok", "x"]}
    assert "\\u001b" not in result["content"][0]["text"] and "\x1b" not in result["content"][0]["text"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_strip_structured_returns_the_same_object_when_clean():
    clean = {"a": ["b", {"c": 1}]}
    assert strip_structured(clean) is clean
    assert strip_structured({"\x1b[1mk": "v"}) == {"k": "v"}


@pytest.mark.asyncio
async def test_a_custom_error_code_reaches_the_envelope(wire):
    server = Server("c", policy=Policy(gates=Gates(), contract=True))

    @server.tool(destructive=False, open_world=False)
    def save(version: int) -> None:
        raise ToolError("the file changed since version 3", code="E_CONFLICT", retryable=True,
                        suggested_fix="Read it again and retry.", details={"current": 4})

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "save", {"version": 3})
        schema = (await c.request("tools/list", {}))["tools"][0]["outputSchema"]
    assert result["structuredContent"]["error"] == {
        "code": "E_CONFLICT", "message": "the file changed since version 3", "details": {"current": 4},
        "retryable": True, "suggestedFix": "Read it again and retry."}
    jsonschema.validate(result["structuredContent"], schema)


@pytest.mark.asyncio
async def test_an_is_error_result_is_audited_as_an_error_without_the_contract_too(wire):
    audit = MemoryAudit()
    server = Server("a", policy=Policy(gates=Gates(), audit=audit))

    @server.tool(read_only=True, open_world=False)
    def probe() -> ToolResult:
        return ToolResult("the device did not answer", is_error=True)

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "probe")
    assert result["isError"] is True and result["content"][0]["text"] == "the device did not answer"
    assert [(a["outcome"], a["code"]) for a in audit.lines] == [("error", "E_TOOL_FAILED")]


@pytest.mark.asyncio
async def test_resource_not_found_raised_in_a_tool_is_e_not_found(wire):
    from mcpkit import ResourceNotFound

    server = Server("r", policy=Policy(gates=Gates(), contract=True))

    @server.tool(read_only=True, open_world=False)
    def open_note(uri: str) -> str:
        raise ResourceNotFound(uri)  # shared lookup code, also used by a resource handler

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "open_note", {"uri": "notes://9"})
    error = result["structuredContent"]["error"]
    assert (error["code"], error["message"], error["details"]) == (
        "E_NOT_FOUND", "Resource not found: notes://9", {"uri": "notes://9"})
