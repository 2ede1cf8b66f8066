"""Error reporting: tools/call of an unknown tool, arguments that fail the inputSchema, and no
response to a notification."""

from __future__ import annotations

import uuid
from typing import Any

from ..context import CheckContext, Skip, describe, read_only
from ..model import Finding
from ..registry import rule, since
from ..samples import invalid_arguments

INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601


@rule(
    # advice: the spec names unknown tools among protocol errors and the schema says "should" in
    # lower case; no RFC 2119 keyword states it, so a tool result for one is info, not a warning
    "errors.unknown-tool", example="wrong_error_codes",
    keyword="advice", requirements=("TL-10",),
    title="tools/call of an unknown tool gets a JSON-RPC error (-32602), not a tool result",
    fix="answer tools/call naming a tool you do not have with JSON-RPC error -32602 (not -32601, "
    "which means the method tools/call itself is unknown, and not an isError result)",
    quote="Protocol Errors: Standard JSON-RPC errors for issues like: Unknown tools [...] "
    "(schema, CallToolResult.isError: any errors in finding the tool [...] should be reported as an MCP "
    "error response.)",
    source="server/tools#error-handling, schema CallToolResult.isError",
    fixes={
        "mcpkit": "built in: an unknown tool is -32602",
        "sdk": "MCPServer turns an unknown tool into an isError result (ToolError); with the low-level Server "
        "raise MCPError(INVALID_PARAMS, f'Unknown tool: {name}') instead",
        "fastmcp": "FastMCP reports an unknown tool as an isError result; a middleware that raises "
        "McpError(ErrorData(code=-32602, ...)) for unknown names fixes it",
        "ts": "McpServer answers an unknown tool with an isError result; with the low-level Server throw "
        "new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`)",
    },
)
async def check_unknown_tool(ctx: CheckContext) -> list[Finding]:
    tools = await ctx.tools()
    names = {t.get("name") for t in tools}
    name = "mcpkit-check-no-such-tool"
    while name in names:  # pragma: no cover - a server that has it
        name += "-" + uuid.uuid4().hex[:4]
    try:
        result = await ctx.client.request(
            "tools/call", {"name": name, "arguments": {}}, timeout=ctx.timeout, fulfil_inputs=False
        )
    except Exception as exc:  # noqa: BLE001 - the error is what is checked
        code = getattr(exc, "code", None)
        if code == INVALID_PARAMS:
            return []
        if code == METHOD_NOT_FOUND:
            return [ctx.fail("an unknown tool got -32601 Method not found; it is -32602 Invalid params")]
        return [ctx.fail(f"an unknown tool got {describe(exc)}; expected -32602")]
    if isinstance(result, dict) and result.get("isError") is True:
        return [ctx.fail("an unknown tool got a tool result with isError, not the protocol error -32602")]
    return [ctx.fail(f"an unknown tool got a result: {result!r:.200}")]


def _pick(ctx: CheckContext, tools: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], str] | None:
    """A tool with required properties to leave out: one the checker may call (read-only under
    --call-tools, or named by --safe-tool), else a read-only one (call_tool then says why it is not
    called)."""
    candidates = []
    for tool in tools:
        made = invalid_arguments(tool.get("inputSchema"))
        if made is not None and isinstance(tool.get("name"), str) and (read_only(tool) or ctx.may_call(tool)):
            candidates.append((tool, made[0], made[1]))
    return next((c for c in candidates if ctx.may_call(c[0])), candidates[0] if candidates else None)


async def _invalid_call(ctx: CheckContext) -> tuple[str, str, Any, BaseException | None]:
    """tools/call of a read-only tool without its required arguments, once per connection:
    (tool name, what is wrong with the arguments, result, the exception instead)."""
    cached = ctx.cache.get("invalid-call")
    if cached is None:
        picked = _pick(ctx, await ctx.tools())
        if picked is None:
            raise ctx.skip("no tool annotated readOnlyHint: true (or named by --safe-tool) has required properties "
                           "to leave out")
        tool, arguments, why = picked
        try:
            cached = (tool["name"], why, await ctx.call_tool(tool, arguments, "arguments missing their required "
                                                             "properties"), None)
        except Skip:
            raise
        except Exception as exc:  # noqa: BLE001 - the error is what is checked
            cached = (tool["name"], why, None, exc)
        ctx.cache["invalid-call"] = cached
    return cached


@rule(
    "errors.invalid-arguments", example="wrong_error_codes --call-tools",
    keyword="SHOULD", requirements=("TL-10",), revisions=since("2025-11-25"),
    default=True,
    title="arguments failing the inputSchema give a tool result with isError (2025-11-25 on; before, "
    "a -32602 error and an isError result are both allowed)",
    fix="report input validation failures as a tool result with isError: true and a message the model can act on",
    quote="Tool Execution Errors: Reported in tool results with isError: true: [...] Input validation errors "
    "(e.g., date in wrong format, value out of range). (schema, CallToolResult.isError: Any errors that originate "
    "from the tool SHOULD be reported inside the result object, with isError set to true, not as an MCP "
    "protocol-level error response.) (2025-06-18 and earlier list 'Invalid arguments' "
    "under Protocol Errors and 'Invalid input data' under Tool Execution Errors: both are accepted there.)",
    source="2025-11-25/server/tools#error-handling (SEP-1303)",
    fixes={
        "mcpkit": "built in: invalid arguments give an isError result from 2025-11-25 on",
        "sdk": "built in: MCPServer reports validation errors as isError results",
        "fastmcp": "built in: validation errors are isError results",
        "ts": "built in (1.2x+): McpServer reports invalid arguments as an isError result",
    },
)
async def check_invalid_arguments(ctx: CheckContext) -> list[Finding]:
    name, why, result, exc = await _invalid_call(ctx)
    if exc is not None:
        if getattr(exc, "code", None) == INVALID_PARAMS:
            return [ctx.fail(f"tool {name!r} {why} got the protocol error -32602; since 2025-11-25 input "
                             "validation errors are tool errors (isError: true)", tool=name)]
        return [ctx.fail(f"tool {name!r} {why} got {describe(exc)}; expected a result with isError: true",
                         tool=name)]
    if isinstance(result, dict) and result.get("isError") is True:
        return [ctx.ok(f"tool {name!r} {why}: isError result", tool=name)]
    raise ctx.skip(f"tool {name!r} {why} did not fail (tools.input-validated reports it)")


@rule(
    "tools.input-validated", example="no_validation --call-tools",
    keyword="MUST", requirements=("TL-11",),
    title="a call missing required arguments is refused (an isError result or a JSON-RPC error)",
    fix="validate the arguments of every call against the tool's inputSchema before running it",
    quote="Servers MUST: Validate all tool inputs",
    source="server/tools#security-considerations",
    fixes={
        "mcpkit": "built in: every call is validated against the inputSchema",
        "sdk": "built in for typed tool functions; validate by hand in a low-level call_tool handler",
        "fastmcp": "built in for typed tool functions",
        "ts": "built in with a zod inputSchema; validate by hand in a low-level CallTool handler",
    },
)
async def check_input_validated(ctx: CheckContext) -> list[Finding]:
    name, why, result, exc = await _invalid_call(ctx)
    if exc is not None or (isinstance(result, dict) and result.get("isError") is True):
        return [ctx.ok(f"tool {name!r} {why}: refused", tool=name)]
    return [ctx.fail(f"tool {name!r} {why} succeeded: the arguments were not validated", tool=name)]


#: a notification no server knows; it must be ignored without an answer
PROBE_NOTIFICATION = "notifications/mcpkit-check/unknown"


@rule(
    "protocol.notification-unanswered", example="answers_notifications",
    keyword="MUST", requirements=("BP-09",), transports=("stdio", "memory"),
    title="a notification (even an unknown one) gets no response",
    fix="never answer a message without an id: drop an unknown notification silently (no -32601 error)",
    quote="Notifications are sent from the client to the server or vice versa, as a one-way message. "
    "The receiver MUST NOT send a response.",
    source="basic/index#notifications",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in",
        "fastmcp": "built in",
        "ts": "built in (Protocol ignores unknown notifications)",
    },
)
async def check_notification_unanswered(ctx: CheckContext) -> list[Finding]:
    before = len(ctx.client.unmatched)
    await ctx.client.notify(PROBE_NOTIFICATION, {})
    await ctx.client.notify("notifications/cancelled", {"requestId": "mcpkit-check-never-sent"})
    # a request after them: its answer comes after any answer to the notifications. An error
    # answer orders them as well as a result does; a server without ping is lifecycle.ping's
    # finding, not this rule's
    try:
        await ctx.request("server/discover" if ctx.modern else "ping")
    except Exception as exc:  # noqa: BLE001
        if getattr(exc, "code", None) is None:
            raise  # no answer at all: nothing says the notifications were read
    answers = [m for m in ctx.client.unmatched[before:] if "id" not in m or m.get("id") is None]
    if answers:
        first = answers[0]
        what = f"error {first['error'].get('code')}" if isinstance(first.get("error"), dict) else "a result"
        return [ctx.fail(f"{len(answers)} response(s) to notifications ({what}, id {first.get('id')!r})",
                         responses=answers[:3])]
    return []
