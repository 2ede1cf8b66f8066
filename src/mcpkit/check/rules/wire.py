"""The envelope of what the server sent, and its progress notifications: judged from every message
of every connection as it arrived (check/wire.py), so no rule here sends a request of its own."""

from __future__ import annotations

from ..context import CheckContext
from ..model import Finding
from ..registry import rule

#: the made-up revision's connection (runner.UNKNOWN_VERSION): no revision to report under
UNKNOWN = "unknown"

_BUILT_IN = {
    "mcpkit": "built in",
    "sdk": "built in (the session layer writes the envelope)",
    "fastmcp": "built in (the official SDK's session layer writes the envelope)",
    "ts": "built in (Protocol writes the envelope)",
}


def _judge(ctx: CheckContext, kind: str, what: str) -> list[Finding]:
    """A failure per revision whose connection saw a problem of ``kind``."""
    out: list[Finding] = []
    heard = 0
    for version, probe in ctx.probes.items():
        if version == UNKNOWN or not probe.wire.heard:
            continue
        heard += 1
        found = probe.wire.problems.get(kind)
        if found:
            count = probe.wire.counts.get(kind, len(found))
            more = f" (and {count - 1} more)" if count > 1 else ""
            out.append(ctx.fail(found[0] + more, revision=version, problems=found))
    if not heard:
        raise ctx.skip("the server sent nothing")
    return out or [ctx.ok(f"{what} on {heard} connection(s)")]


@rule(
    "protocol.error-object", example="error_object --rule capabilities.backed",
    keyword="MUST", requirements=("BP-06",), scope="server",
    title="every error response has an integer code and a string message",
    fix="answer errors with {\"code\": <integer>, \"message\": \"<one sentence>\"} (and data if you like); "
    "the code is a number such as -32602, never a string",
    quote="(spec/requirements.md BP-06, MUST:) error has an integer code and a string message. (schema Error: "
    "code: integer, message: string, both required)",
    source="basic/index#error-responses, schema Error",
    fixes=_BUILT_IN | {"ts": "throw new McpError(ErrorCode.X, message): the code is a number"},
    reproduce="reads every error the server sent during the run (the handshake and every rule's requests); "
    "a server answering an error as {\"code\": \"internal\"} fails",
)
async def check_error_object(ctx: CheckContext) -> list[Finding]:
    return _judge(ctx, "error-object", "every error had an integer code and a string message")


@rule(
    "protocol.result-or-error", example="result_and_error --rule capabilities.backed",
    keyword="MUST", requirements=("BP-07",), scope="server",
    title="no response has both result and error",
    fix="send either result or error in a response, never both",
    quote="Either a result or an error MUST be set. A response MUST NOT set both.",
    source="2025-03-26/basic/index#responses",
    fixes=_BUILT_IN,
    reproduce="reads every response the server sent during the run; one with both members fails",
)
async def check_result_or_error(ctx: CheckContext) -> list[Finding]:
    return _judge(ctx, "result-and-error", "no response had both result and error")


@rule(
    "protocol.response-id", example="string_ids", keyword="MUST", requirements=("BP-05", "BP-06"), scope="server",
    title="a response echoes its request's id with the same JSON type (1, not \"1\")",
    fix="copy the request's id into the response unchanged: a number stays a number, a string a string",
    quote="Responses MUST include the same ID as the request they correspond to.",
    source="basic/index#responses",
    fixes=_BUILT_IN | {"sdk": "built in (the low-level Server echoes the id it got)"},
    reproduce="the checker numbers its requests with integers; a response whose id is a string (or a float) "
    "fails the request at once, naming both ids, instead of waiting for a timeout",
)
async def check_response_id(ctx: CheckContext) -> list[Finding]:
    return _judge(ctx, "id-type", "every response carried an integer id as sent")


@rule(
    "progress.token", example="progress_foreign_token --call-tools --rule tools.read-only-output",
    keyword="MUST", requirements=("PR-02",), scope="server",
    title="progress notifications name only a progressToken a request carried",
    fix="send notifications/progress only with the progressToken of the request being worked on, "
    "unchanged, and none for a request that carried no token",
    quote="Progress notifications MUST only reference tokens that: Were provided in an active request; "
    "Are associated with an in-progress operation",
    source="basic/utilities/progress#behavior-requirements",
    fixes={
        "mcpkit": "built in: ctx.progress() uses the request's token and sends nothing without one",
        "sdk": "use ctx.report_progress(), which sends nothing when the request carried no token",
        "fastmcp": "use ctx.report_progress()",
        "ts": "send progress with extra._meta?.progressToken only when it is set",
    },
    reproduce="every progress notification of the run is read; with --call-tools (or --safe-tool) the tools "
    "the checker calls carry a token of its own. Progress for any other token fails",
)
async def check_progress_token(ctx: CheckContext) -> list[Finding]:
    return _judge(ctx, "progress-token", "progress named only the tokens sent")


@rule(
    "progress.increases", example="progress_down --call-tools --rule tools.read-only-output",
    keyword="MUST", requirements=("PR-03",), scope="server",
    title="the progress value of one token increases with every notification",
    fix="report progress as a running total that only grows (send nothing when it does not move)",
    quote="The progress value MUST increase with each notification, even if the total is unknown.",
    source="basic/utilities/progress#progress-flow",
    fixes={
        "mcpkit": "pass a growing value to ctx.progress()",
        "sdk": "pass a growing value to ctx.report_progress()",
        "fastmcp": "pass a growing value to ctx.report_progress()",
        "ts": "send a growing progress value",
    },
    reproduce="with --call-tools (or --safe-tool) the tools the checker calls carry a progress token; progress "
    "for it that stays or goes down fails",
)
async def check_progress_increases(ctx: CheckContext) -> list[Finding]:
    return _judge(ctx, "progress-order", "progress only increased")
