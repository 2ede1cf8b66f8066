"""Tool search driven as a model would through the official ``mcp`` client, over stdio:
list (small), search, call through the pair; a gated tool is never found nor callable; every
call is audited as the tool it names; and the host that asks gets the whole list."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = [pytest.mark.interop, pytest.mark.anyio]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool_search.py"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _structured(result: Any) -> Any:
    assert not result.is_error, result
    return result.structured_content


async def test_a_model_like_flow_through_the_pair(tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    env = {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "PATH", "HOME")}
    env["MCPKIT_AUDIT_LOG"] = str(audit)
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcpkit", "serve", str(EXAMPLE)], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == ["help", "search_tools", "call_tool"]

        found = _structured(await session.call_tool("search_tools", {"query": "add a task to my to-do list"}))
        assert found["tools"][0]["name"] == "add_task"
        schema = found["tools"][0]["inputSchema"]
        assert schema["required"] == ["description"]

        done = await session.call_tool("call_tool", {"name": "add_task", "arguments": {"description": "buy milk"}})
        assert _structured(done) == {"result": 1}

        # delete_note is destructive, and MCPKIT_ALLOW_DESTRUCTIVE is not set: hidden
        searched = _structured(await session.call_tool("search_tools", {"query": "delete a note", "limit": 20}))
        assert "delete_note" not in [t["name"] for t in searched["tools"]]
        through = await session.call_tool("call_tool", {"name": "delete_note", "arguments": {"title": "groceries"}})
        direct = await session.call_tool("delete_note", {"title": "groceries"})
        assert through.is_error and direct.is_error
        assert through.content[0].text == direct.content[0].text  # type: ignore[union-attr]

        # the host that asks gets the whole catalog (less what the gates hide)
        whole = await session.list_tools(params=types.PaginatedRequestParams(
            _meta={"dev.mcpkit/fullToolList": True}))  # type: ignore[call-arg]
        names = {t.name for t in whole.tools}
        assert {"help", "add_task", "read_note", "word_count"} <= names
        assert not names & {"search_tools", "call_tool", "delete_note"}
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(line["tool"], line["outcome"]) for line in lines] == [
        ("search_tools", "ok"), ("add_task", "ok"), ("search_tools", "ok"), ("delete_note", "denied"),
        ("delete_note", "denied")]
