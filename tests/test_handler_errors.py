"""Errors resource and prompt handlers raise on purpose, answered with each revision's code; typed
prompt arguments."""

from __future__ import annotations

import enum
from typing import Any, Literal, Optional

import jsonschema
import pytest

from mcpkit import PromptNotFound, ResourceNotFound, Server, ToolError
from mcpkit.protocol.revisions import HANDSHAKE_VERSIONS
from mcpkit.server.schema import input_spec
from tests.harness import RpcError, connect

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


class Tone(enum.Enum):
    FORMAL = "formal"
    CASUAL = "casual"


def make() -> Server:
    server = Server("errs")

    @server.resource_template("notes://{id}")
    def note(id: str) -> str:
        if id == "missing":
            raise ResourceNotFound(f"notes://{id}")
        if id == "locked":
            raise ToolError("the note is locked by another editor", code="E_CONFLICT", retryable=True,
                            suggested_fix="Retry in a minute.")
        if id == "bad":
            raise ToolError("ids are numeric", code="E_SCHEMA_VALIDATION")
        if id == "gone":
            raise ToolError("deleted yesterday", code="E_NOT_FOUND")
        return f"note {id}"

    @server.prompt
    def review(file: str, lines: int, strict: bool = False, tone: Tone = Tone.FORMAL,
               focus: Literal["bugs", "style"] = "bugs", tags: Optional[list[str]] = None) -> str:
        """Review a file."""
        if file == "ghost":
            raise PromptNotFound("review", "There is no review for a file that does not exist.")
        if file == "busy":
            raise ToolError("the reviewer is busy", code="E_RATE_LIMITED")
        return f"{file}:{lines}:{strict}:{tone.value}:{focus}:{tags}"

    return server


async def error_of(client: Any, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as info:
        await client.request(method, params)
    return info.value


@pytest.mark.req("RS-08")
@pytest.mark.asyncio
@pytest.mark.parametrize("version", [*HANDSHAKE_VERSIONS, MODERN])
async def test_resource_not_found_gets_each_revisions_code(wire, version):
    server = make()
    meta = {"_meta": META} if version == MODERN else {}
    async with connect(server, wire, None if version == MODERN else version) as c:
        missing = await error_of(c, "resources/read", {"uri": "notes://missing", **meta})
        gone = await error_of(c, "resources/read", {"uri": "notes://gone", **meta})
        ok = await c.request("resources/read", {"uri": "notes://7", **meta})
    code = -32602 if version == MODERN else -32002
    assert (missing.code, missing.message, missing.data) == (code, "Resource not found: notes://missing",
                                                            {"uri": "notes://missing"})
    assert gone.code == code and gone.data["uri"] == "notes://gone" and gone.message == "deleted yesterday"
    assert ok["contents"][0]["text"] == "note 7"


@pytest.mark.req("RS-08", "PM-05")
@pytest.mark.asyncio
async def test_tool_errors_from_resource_and_prompt_handlers_reach_the_client(wire):
    async with connect(make(), wire, "2025-11-25") as c:
        locked = await error_of(c, "resources/read", {"uri": "notes://locked"})
        bad = await error_of(c, "resources/read", {"uri": "notes://bad"})
        ghost = await error_of(c, "prompts/get", {"name": "review", "arguments": {"file": "ghost", "lines": "1"}})
        busy = await error_of(c, "prompts/get", {"name": "review", "arguments": {"file": "busy", "lines": "1"}})
    assert locked.code == -32603 and locked.message == "the note is locked by another editor Fix: Retry in a minute."
    assert locked.data == {"code": "E_CONFLICT", "retryable": True, "suggestedFix": "Retry in a minute.",
                           "uri": "notes://locked"}
    assert bad.code == -32602 and bad.message == "ids are numeric"
    assert (ghost.code, ghost.message, ghost.data) == (
        -32602, "There is no review for a file that does not exist.", {"name": "review"})
    assert busy.code == -32603 and busy.message == "the reviewer is busy" and busy.data["retryable"] is True


@pytest.mark.req("PM-06")
@pytest.mark.asyncio
async def test_prompt_arguments_are_converted_to_their_declared_types(wire):
    async with connect(make(), wire, "2025-11-25") as c:
        typed = await c.request("prompts/get", {"name": "review", "arguments": {
            "file": "42", "lines": "10", "strict": "true", "tone": "casual", "focus": "style",
            "tags": '["a", "b"]'}})
        plain = await c.request("prompts/get", {"name": "review", "arguments": {"file": "a.py", "lines": "3"}})
        bad_int = await error_of(c, "prompts/get", {"name": "review", "arguments": {"file": "a", "lines": "ten"}})
        bad_enum = await error_of(c, "prompts/get", {"name": "review", "arguments": {
            "file": "a", "lines": "1", "focus": "speed"}})
        listed = (await c.request("prompts/list", {}))["prompts"][0]
    assert typed["messages"][0]["content"]["text"] == "42:10:True:casual:style:['a', 'b']"
    assert plain["messages"][0]["content"]["text"] == "a.py:3:False:formal:bugs:None"
    assert bad_int.code == -32602 and bad_int.data == {"argument": "lines", "value": "ten"}
    assert bad_int.message == "Invalid value for argument 'lines' of prompt 'review': 'ten' is not an integer."
    assert bad_enum.message == ("Invalid value for argument 'focus' of prompt 'review': 'speed' is not one of "
                                '"bugs", "style".')
    assert [a["name"] for a in listed["arguments"]] == ["file", "lines", "strict", "tone", "focus", "tags"]


def test_an_optional_list_defaulting_to_none_has_a_schema_its_default_satisfies():
    def tagged(tags: Optional[list[str]] = None, limit: list[int] = None) -> None:  # type: ignore[assignment]
        ...

    schema = input_spec(tagged).schema
    for name in ("tags", "limit"):
        prop = {**schema["properties"][name]}
        jsonschema.validate(prop["default"], prop)
