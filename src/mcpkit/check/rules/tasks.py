"""Tasks (2025-11-25): a tool that requires a task is refused when called without one."""

from __future__ import annotations

from ..context import CheckContext, Skip, describe
from ..model import Finding
from ..registry import rule
from ..samples import sample_arguments

#: TK-03 asks for -32601; the error-handling section of the same page allows -32600 ("Task
#: augmentation required"): either refusal passes, running the tool does not
REFUSALS = (-32601, -32600)


@rule(
    "tasks.required", example="task_required_runs --call-tools",
    keyword="MUST", requirements=("TK-03",), revisions=("2025-11-25",),
    title="a tool with execution.taskSupport \"required\" called without a task is refused (-32601), not run",
    fix="answer tools/call of a tool whose execution.taskSupport is \"required\" with -32601 when the request "
    "has no task field, before running anything",
    quote="(spec/requirements.md TK-03:) If a client calls a \"required\" tool without a task, the server MUST "
    "return -32601. (The error-handling section instead allows -32600 \"Task augmentation required\"; either "
    "refusal passes here.)",
    source="2025-11-25/basic/utilities/tasks#tool-level-negotiation",
    fixes={
        "mcpkit": "mcpkit serves tasks through the 2026-07-28 extension; a hand-written 2025-11-25 tasks "
        "handler checks params.task first",
        "sdk": "check params.task in your call_tool handler and raise MCPError(METHOD_NOT_FOUND, ...) without it",
        "fastmcp": "check for the task before running the tool and raise McpError(ErrorData(code=-32601, ...))",
        "ts": "check request.params.task in the CallTool handler and throw McpError(ErrorCode.MethodNotFound, ...)",
    },
    reproduce="calls each such tool without a task field, with sample arguments; only a tool annotated "
    "readOnlyHint under --call-tools, or named by --safe-tool (a broken server runs it). A result fails",
)
async def check_required(ctx: CheckContext) -> list[Finding]:
    required = [t for t in await ctx.tools()
                if isinstance(t.get("execution"), dict) and t["execution"].get("taskSupport") == "required"]
    if not required:
        raise ctx.skip("no tool has execution.taskSupport \"required\"")
    out: list[Finding] = []
    called = 0
    skipped: Skip | None = None
    for tool in required:
        name = tool.get("name")
        try:
            result = await ctx.call_tool(tool, sample_arguments(tool.get("inputSchema")), "without the task it requires")
        except Skip as skip:
            skipped = skip
            continue
        except Exception as exc:  # noqa: BLE001 - a refusal is what is checked
            called += 1
            if getattr(exc, "code", None) not in REFUSALS:
                out.append(ctx.fail(f"tool {name!r} called without the task it requires got {describe(exc)}; "
                                    "expected -32601", tool=name))
            continue
        called += 1
        what = "an isError result" if isinstance(result, dict) and result.get("isError") is True else "a result"
        out.append(ctx.fail(f"tool {name!r} requires a task (execution.taskSupport \"required\") but, called "
                            f"without one, it ran and gave {what}; expected -32601", tool=name))
    if not called and skipped is not None:
        raise skipped
    return out or [ctx.ok(f"{called} tool(s) requiring a task refused a call without one")]
