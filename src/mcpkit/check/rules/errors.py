"""Error reporting of tools/call: an unknown tool, and arguments that fail the inputSchema."""

from __future__ import annotations

import uuid
from typing import Any

from ..context import CheckContext, describe
from ..model import Finding
from ..registry import rule
from ..samples import invalid_arguments

INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601


async def _call(ctx: CheckContext, name: str, arguments: dict[str, Any]) -> tuple[Any, BaseException | None]:
    try:
        result = await ctx.client.request(
            "tools/call", {"name": name, "arguments": arguments}, timeout=ctx.timeout, fulfil_inputs=False
        )
    except Exception as exc:  # noqa: BLE001 - the error is what is checked
        return None, exc
    return result, None


@rule(
    "errors.unknown-tool", severity="error", requirements=("TL-10",),
    title="tools/call of an unknown tool gets a -32602 Invalid params error",
    fix="answer tools/call naming a tool you do not have with JSON-RPC error -32602 (not -32601, "
    "which means the method tools/call itself is unknown)",
)
async def check_unknown_tool(ctx: CheckContext) -> list[Finding]:
    tools = await ctx.tools()
    names = {t.get("name") for t in tools}
    name = "mcpkit-check-no-such-tool-" + uuid.uuid4().hex[:8]
    while name in names:  # pragma: no cover - a 32-bit collision
        name += "x"
    result, exc = await _call(ctx, name, {})
    if exc is None:
        if isinstance(result, dict) and result.get("isError") is True:
            return [ctx.fail("an unknown tool got a tool result with isError, not the protocol error -32602")]
        return [ctx.fail(f"an unknown tool got a result: {result!r:.200}")]
    code = getattr(exc, "code", None)
    if code == INVALID_PARAMS:
        return []
    if code == METHOD_NOT_FOUND:
        return [ctx.fail("an unknown tool got -32601 Method not found; it is -32602 Invalid params")]
    return [ctx.fail(f"an unknown tool got {describe(exc)}; expected -32602")]


def _pick(tools: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], str] | None:
    """A tool with required properties, read-only ones first, then ones not marked destructive."""
    def rank(tool: dict[str, Any]) -> int:
        ann = tool.get("annotations") if isinstance(tool.get("annotations"), dict) else {}
        if ann.get("readOnlyHint") is True:
            return 0
        return 1 if ann.get("destructiveHint") is False else 2

    for tool in sorted(tools, key=rank):
        made = invalid_arguments(tool.get("inputSchema"))
        if made is not None and isinstance(tool.get("name"), str):
            return tool, made[0], made[1]
    return None


@rule(
    "errors.invalid-arguments", severity="error", requirements=("TL-10", "TL-11"),
    title="arguments failing the inputSchema give an isError result (2025-11-25+) or a -32602 error (before)",
    fix="validate arguments against the inputSchema; from 2025-11-25 on report a failure as a tool result "
    "with isError: true and a readable message, before that as JSON-RPC error -32602",
)
async def check_invalid_arguments(ctx: CheckContext) -> list[Finding]:
    picked = _pick(await ctx.tools())
    if picked is None:
        raise ctx.skip("no tool has required properties to leave out")
    tool, arguments, why = picked
    name = tool["name"]
    result, exc = await _call(ctx, name, arguments)
    as_tool_error = ctx.rev.invalid_arguments_as_tool_error
    want = "a result with isError: true" if as_tool_error else "error -32602"
    if exc is not None:
        code = getattr(exc, "code", None)
        if code == INVALID_PARAMS and not as_tool_error:
            return [ctx.ok(f"tool {name!r} {why}: -32602", tool=name)]
        if code == INVALID_PARAMS:
            return [ctx.fail(f"tool {name!r} {why} got the protocol error -32602; since 2025-11-25 input "
                             "validation errors are tool errors (isError: true)", tool=name)]
        return [ctx.fail(f"tool {name!r} {why} got {describe(exc)}; expected {want}", tool=name)]
    if not isinstance(result, dict):
        return [ctx.fail(f"tool {name!r} {why} got {result!r:.200}; expected {want}", tool=name)]
    if result.get("isError") is True:
        if as_tool_error:
            return [ctx.ok(f"tool {name!r} {why}: isError result", tool=name)]
        return [ctx.fail(f"tool {name!r} {why} got an isError result; before 2025-11-25 invalid arguments "
                         "are the protocol error -32602", tool=name)]
    return [ctx.fail(f"tool {name!r} {why} succeeded: the arguments were not validated (expected {want})",
                     tool=name)]
