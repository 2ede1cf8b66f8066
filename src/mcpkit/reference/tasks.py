"""The tasks fixtures of the reference server (CONTRACT-2026 §2.5): the
``io.modelcontextprotocol/tasks`` extension, served to 2026-07-28 clients that declare it."""

from __future__ import annotations

import asyncio
from typing import Any

from ..protocol.errors import INTERNAL_ERROR, McpError, ToolError
from ..server.context import Context
from . import server

__all__: list[str] = []

_NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _greet(arguments: dict[str, Any]) -> str:
    return f"Hello, {arguments['name']}!"


server.add_tool(
    "greet",
    _greet,
    input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    description="Greets someone by name; never a task.",
)


async def _slow_compute(arguments: dict[str, Any]) -> str:
    seconds = float(arguments["seconds"])
    if seconds > 0:
        await asyncio.sleep(seconds)
    label = arguments.get("label")
    return f"Computed for {seconds:g} s" + (f" ({label})." if label else ".")


server.add_tool(
    "slow_compute",
    _slow_compute,
    input_schema={
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
        "required": ["seconds"],
    },
    description="Sleeps the given number of seconds, then answers; a task when the client allows it.",
    task="optional",
)


async def _failing_job(arguments: dict[str, Any]) -> str:
    await asyncio.sleep(1)
    raise ToolError("The job failed after 1 s.")


server.add_tool(
    "failing_job",
    _failing_job,
    input_schema={"type": "object", "properties": {}},
    description="Always a task; ends after about 1 s with a tool error (completed, isError).",
    task="required",
)


async def _protocol_error_job(arguments: dict[str, Any]) -> str:
    await asyncio.sleep(0.2)
    raise McpError(INTERNAL_ERROR, "The job hit a protocol-level error.")


server.add_tool(
    "protocol_error_job",
    _protocol_error_job,
    input_schema={"type": "object", "properties": {}},
    description="Always a task; ends with a JSON-RPC error (failed).",
    task="required",
)


_CONFIRM_FORM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


async def _confirm_delete(arguments: dict[str, Any], ctx: Context) -> str:
    filename = arguments["filename"]
    answer = await ctx.elicit(f"Delete {filename}?", _CONFIRM_FORM, key="confirm")
    if answer.get("action") == "accept" and (answer.get("content") or {}).get("confirm") is True:
        return f"Deleted {filename}."
    return f"Kept {filename}."


server.add_tool(
    "confirm_delete",
    _confirm_delete,
    input_schema={"type": "object", "properties": {"filename": {"type": "string"}}, "required": ["filename"]},
    description="Asks for confirmation (elicitation), then 'deletes' the file.",
    task="optional",
)

_PARTIAL_FORM = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
    "required": ["name", "confirm"],
}


async def _multi_input(arguments: dict[str, Any], ctx: Context) -> str:
    first, second = await asyncio.gather(
        ctx.elicit("First input", _PARTIAL_FORM, key="first"),
        ctx.elicit("Second input", _PARTIAL_FORM, key="second"),
    )
    names = [(a.get("content") or {}).get("name", "") for a in (first, second)]
    return f"Received {names[0]} and {names[1]}."


server.add_tool(
    "multi_input",
    _multi_input,
    input_schema={"type": "object", "properties": {}},
    description="Asks two questions at once (two elicitations), then completes.",
    task="optional",
)


@server.tool(task="required", task_after_input=True)
async def test_tool_with_task(ctx: Context) -> str:
    """Asks for a name (multi-round-trip), then finishes as a task."""
    answer = await ctx.elicit("What is your name?", _NAME_FORM, key="user_name")
    name = (answer.get("content") or {}).get("name", "")
    await ctx.start_task()
    await asyncio.sleep(0.1)
    return f"Hello, {name}! (from a task)"
