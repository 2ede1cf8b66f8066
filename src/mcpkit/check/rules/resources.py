"""Resources: the error for a resource that does not exist."""

from __future__ import annotations

import uuid

from ..context import CheckContext, describe
from ..model import Finding
from ..registry import rule


def _missing_uri(ctx: CheckContext, listed: list[str]) -> str:
    """A URI that cannot exist, in the scheme of a listed resource when there is one."""
    token = "mcpkit-check-missing-" + uuid.uuid4().hex[:12]
    scheme = next((u.split("://", 1)[0] for u in listed if "://" in u), None)
    if scheme is None or scheme == "file":
        return f"mcpkit-check://missing/{token}"
    return f"{scheme}://{token}/{token}"


@rule(
    "resources.not-found-code", example="wrong_not_found_code",
    keyword="SHOULD", keywords={"2026-07-28": "MUST"}, requirements=("RS-08", "EC-03"),
    quote="Servers SHOULD return standard JSON-RPC errors for common failure cases: Resource not found: -32002. "
    "(2026-07-28: If the requested resource does not exist, servers MUST return a JSON-RPC error with code "
    "-32602 (Invalid Params). [...] Servers MUST NOT return an empty contents array for a non-existent resource.)",
    source="server/resources#error-handling",
    fixes={
        "mcpkit": "built in: an unknown URI is -32002 (-32602 with data.uri in 2026-07-28)",
        "sdk": "MCPServer answers -32602 'Unknown resource'; with the low-level Server raise "
        "MCPError(-32002, 'Resource not found', {'uri': uri}) for handshake revisions",
        "fastmcp": "raise McpError(ErrorData(code=-32002, message='Resource not found', data={'uri': uri}))",
        "ts": "throw new McpError(-32002, 'Resource not found', { uri }) from the read callback "
        "(McpServer answers -32602)",
    },
    title="resources/read of an unknown URI gets the revision's not-found error "
    "(-32002 up to 2025-11-25, -32602 in 2026-07-28)",
    fix="answer resources/read of a URI you do not have with -32002 (handshake revisions) or -32602 "
    "(2026-07-28), with data.uri; never an empty contents array",
)
async def check_not_found(ctx: CheckContext) -> list[Finding]:
    if not ctx.has("resources"):
        raise ctx.skip("the server declares no resources capability")
    try:
        listed = [str(r.get("uri")) for r in await ctx.listing("resources/list", "resources")]
    except Exception:  # noqa: BLE001 - a failing list is capabilities.backed's finding
        listed = []
    uri = _missing_uri(ctx, listed)
    want = ctx.rev.resource_not_found
    try:
        result = await ctx.request("resources/read", {"uri": uri})
    except Exception as exc:  # noqa: BLE001
        code = getattr(exc, "code", None)
        if code == want:
            return [ctx.ok(f"{uri}: {want}")]
        if code == -32002 and ctx.modern:
            return [ctx.fail(f"{uri}: -32002 must not be emitted in 2026-07-28; it is -32602 with data.uri")]
        return [ctx.fail(f"reading {uri} got {describe(exc)}; expected {want}", uri=uri)]
    contents = result.get("contents") if isinstance(result, dict) else None
    if contents == []:
        return [ctx.fail(f"reading {uri} gave an empty contents array; expected error {want}", uri=uri)]
    return [ctx.fail(f"reading {uri} gave a result; expected error {want}", uri=uri)]
