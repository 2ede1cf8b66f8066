"""Tools: names, descriptions, and (on request) what read-only tools return."""

from __future__ import annotations

import re
from typing import Any

from ...server.validation import compile_schema, describe_errors, format_errors
from ..context import CheckContext, Skip
from ..model import Finding
from ..registry import rule, since
from ..samples import sample_arguments

NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


@rule(
    "tools.name", example="bad_tool_names",
    keyword="SHOULD", requirements=("TL-06",), revisions=since("2025-11-25"),
    title="tool names are 1-128 characters of A-Z a-z 0-9 _ - . and unique",
    fix="rename the tool: letters, digits, '_', '-' and '.' only, at most 128 characters, no two alike",
    quote="Tool names SHOULD be between 1 and 128 characters in length (inclusive). [...] The following SHOULD "
    "be the only allowed characters: uppercase and lowercase ASCII letters (A-Z, a-z), digits (0-9), "
    "underscore (_), hyphen (-), and dot (.) [...] Tool names SHOULD be unique within a server.",
    source="2025-11-25/server/tools#tool-names (SEP-986)",
    fixes={
        "mcpkit": "pass name='...' to @server.tool (mcpkit refuses invalid names at registration)",
        "sdk": "pass name='...' to @mcp.tool()",
        "fastmcp": "pass name='...' to @mcp.tool",
        "ts": "change the first argument of server.registerTool(name, ...)",
    },
)
async def check_names(ctx: CheckContext) -> list[Finding]:
    tools = await ctx.tools()
    out: list[Finding] = []
    seen: dict[str, int] = {}
    for tool in tools:
        name = tool.get("name")
        if not isinstance(name, str):
            out.append(ctx.fail(f"a tool has no string name: {tool!r:.120}"))
            continue
        seen[name] = seen.get(name, 0) + 1
        if not NAME.fullmatch(name):
            out.append(ctx.fail(f"tool name {name!r} is not 1-128 characters of A-Z a-z 0-9 _ - .", tool=name))
    for name, count in seen.items():
        if count > 1:
            out.append(ctx.fail(f"tool name {name!r} is used by {count} tools", tool=name))
    if not out:
        out.append(ctx.ok(f"{len(tools)} tool name(s) valid and unique"))
    return out


@rule(
    "tools.description", example="no_description",
    keyword="advice", requirements=("TL-05",),
    title="every tool has a description",
    fix="give each tool a description: it is what the model reads to decide when to call it",
    quote="description: Human-readable description of functionality (optional in the schema; "
    "the model reads it to choose a tool)",
    source="server/tools#tool",
    fixes={
        "mcpkit": "write a docstring, or pass description='...'",
        "sdk": "write a docstring, or pass description='...' to @mcp.tool()",
        "fastmcp": "write a docstring, or pass description='...'",
        "ts": "pass description in registerTool's config",
    },
)
async def check_descriptions(ctx: CheckContext) -> list[Finding]:
    tools = await ctx.tools()
    out = [
        ctx.fail(f"tool {t.get('name')!r} has no description", tool=t.get("name"))
        for t in tools
        if not (isinstance(t.get("description"), str) and t["description"].strip())
    ]
    return out or [ctx.ok(f"{len(tools)} tool(s) described")]


def _output_problems(tool: dict[str, Any], result: Any, modern: bool) -> str | None:
    """TL-07: structuredContent against outputSchema; None when it conforms."""
    schema = tool.get("outputSchema")
    if "structuredContent" not in result:
        return "declares an outputSchema but returned no structuredContent"
    try:
        validator = compile_schema(schema, f"tool {tool.get('name')!r} outputSchema")
    except ValueError:
        return None  # reported by schema.output-valid
    content = result["structuredContent"]
    if not modern and not isinstance(content, dict):
        return f"structuredContent is a {type(content).__name__}, not an object"
    errors = describe_errors(validator, content)
    if errors:
        return "structuredContent does not match the outputSchema: " + format_errors(errors)
    return None


@rule(
    "tools.read-only-output", example="bad_output --call-tools",
    keyword="MUST", requirements=("TL-07", "TL-09"), default=False,
    revisions=since("2025-06-18"),
    title="tools called with sample arguments (read-only ones under --call-tools, those named by --safe-tool) "
    "return structuredContent that matches their outputSchema",
    fix="return structuredContent that validates against the tool's outputSchema (and content[] always)",
    quote="If an output schema is provided: Servers MUST provide structured results that conform to this schema.",
    source="server/tools#output-schema",
    fixes={
        "mcpkit": "built in: results are checked against the outputSchema before they are sent",
        "sdk": "return a value of the annotated return type; MCPServer builds structuredContent from it",
        "fastmcp": "return a value of the annotated return type",
        "ts": "return structuredContent that the outputSchema (zod) accepts",
    },
)
async def check_read_only_output(ctx: CheckContext) -> list[Finding]:
    tools = [t for t in await ctx.tools() if ctx.may_call(t)]
    if not tools:
        raise ctx.skip("no tool is annotated readOnlyHint: true" + (" or named by --safe-tool" if ctx.options.safe_tools
                                                                     else ""))
    out: list[Finding] = []
    called = 0
    for tool in tools:
        name = tool.get("name")
        args = sample_arguments(tool.get("inputSchema"))
        try:
            result = await ctx.call_tool(tool, args, "sample arguments, to check the output")
        except Skip:
            raise
        except Exception:  # noqa: BLE001 - an error or a timeout: the sample may not suit the tool (TL-07 is about results)
            continue
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            continue  # it asks the client for input (MRTR): nothing to check without a user
        called += 1
        if not isinstance(result, dict) or not isinstance(result.get("content"), list):
            out.append(ctx.fail(f"tool {name!r}: the result has no content array", tool=name, result=result))
            continue
        if result.get("isError") is True or not isinstance(tool.get("outputSchema"), dict):
            continue  # a tool error (the sample may not suit it), or nothing to check against
        problem = _output_problems(tool, result, ctx.modern)
        if problem:
            out.append(ctx.fail(f"tool {name!r} {problem}", tool=name, arguments=args))
    return out or [ctx.ok(f"{called} tool(s) called")]
