"""Resources: the error for a resource that does not exist."""

from __future__ import annotations

import uuid
from typing import Any

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


#: at most this many templates are read per connection (each costs a completion and a read)
MAX_TEMPLATES = 3
#: the value a template variable gets when the server offers no completion for it
SAMPLE_VALUE = "mcpkit-check"


async def _suggested(ctx: CheckContext, template: str, variable: str) -> str | None:
    """The server's own first completion for ``variable`` of ``template`` (completion/complete), if any."""
    if not ctx.has("completions"):
        return None
    try:
        result = await ctx.request("completion/complete", {
            "ref": {"type": "ref/resource", "uri": template}, "argument": {"name": variable, "value": ""}})
    except Exception:  # noqa: BLE001 - no completion for it: a made-up value is used
        return None
    values = (result.get("completion") or {}).get("values") if isinstance(result, dict) else None
    return values[0] if isinstance(values, list) and values and isinstance(values[0], str) and values[0] else None


async def _template_reads(ctx: CheckContext) -> list[dict[str, Any]]:
    """Each of the first templates expanded and read, once per connection: {"template", "uri",
    "suggested" (every value came from the server's completions), "result" or "error"}."""
    cached = ctx.cache.get("template-reads")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    from ...server.uritemplate import UriTemplate

    if not ctx.has("resources"):
        raise ctx.skip("the server declares no resources capability")
    page = (await ctx.first_pages()).get("resources/templates/list")
    listed = page.get("resourceTemplates") if isinstance(page, dict) else None
    texts = [t.get("uriTemplate") for t in listed or [] if isinstance(t, dict)]
    reads: list[dict[str, Any]] = []
    for text in [t for t in texts if isinstance(t, str)][:MAX_TEMPLATES]:
        try:
            template = UriTemplate(text)
        except Exception:  # noqa: BLE001 - not an RFC 6570 template: nothing to expand
            continue
        values = {v: await _suggested(ctx, text, v) for v in template.variables}
        uri = template.expand({v: value or SAMPLE_VALUE for v, value in values.items()})
        read: dict[str, Any] = {"template": text, "uri": uri, "suggested": all(values.values())}
        try:
            read["result"] = await ctx.request("resources/read", {"uri": uri})
        except Exception as exc:  # noqa: BLE001 - judged by the rules
            read["error"] = exc
        reads.append(read)
    ctx.cache["template-reads"] = reads
    return reads


@rule(
    "resources.templates-served", example="templates_unserved", keyword="advice", requirements=("RS-03", "LC-06"),
    title="a listed resource template is served: a URI made from it with the server's own completions reads",
    fix="serve every template you list (resources/read of a URI it expands to), and complete its variables "
    "with values that exist; drop templates you do not serve",
    quote="Resource templates allow servers to expose parameterized resources using URI templates. Arguments "
    "may be auto-completed through the completion API. (The spec states no keyword for serving a listed "
    "template; advertising what is not implemented is the fault LC-06 names for capabilities.)",
    source="server/resources#resource-templates",
    fixes={
        "mcpkit": "built in: @server.resource('scheme://{var}') is both listed and read",
        "sdk": "register the template with @mcp.resource('scheme://{var}'), which serves what it lists",
        "fastmcp": "built in: @mcp.resource('scheme://{var}') is listed and read",
        "ts": "register it with server.registerResource(name, new ResourceTemplate(...), ...), which serves it",
    },
    reproduce="expands the first three templates with the first value completion/complete offers for each "
    "variable and reads the URI; an error for a URI built from the server's own completions fails (with no "
    "completion, a made-up value's not-found is not judged)",
)
async def check_templates_served(ctx: CheckContext) -> list[Finding]:
    reads = await _template_reads(ctx)
    if not reads:
        raise ctx.skip("the server lists no resource template")
    out: list[Finding] = []
    judged = 0
    for read in reads:
        if "error" not in read:
            judged += 1
        elif read["suggested"]:
            judged += 1
            out.append(ctx.fail(f"template {read['template']!r} is listed, but {read['uri']} (made with the server's "
                                f"own completions) got {describe(read['error'])}", template=read["template"]))
    if not judged:
        raise ctx.skip("no template read succeeded and none could be filled from completions (not judged)")
    return out or [ctx.ok(f"{judged} template(s) read")]


@rule(
    "resources.read-uri", example="read_other_uri", keyword="advice", requirements=("RS-03",),
    title="resources/read answers with the URI that was read (among its contents)",
    fix="give the contents of a read the URI the client asked for (sub-resources may add their own)",
    quote="ReadResourceResult.contents: TextResourceContents | BlobResourceContents, each with uri: The URI of "
    "this resource. The server MAY return several contents for one read (e.g. a directory).",
    source="schema ReadResourceResult, ResourceContents.uri",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in for MCPServer resources; a low-level read_resource handler returns the URI it was given",
        "fastmcp": "built in",
        "ts": "return contents: [{ uri: uri.href, ... }] with the URI the callback got",
    },
    reproduce="reads the first listed resource and the URIs made from the first templates (shared with "
    "resources.templates-served); contents none of which carries the URI read fail",
)
async def check_read_uri(ctx: CheckContext) -> list[Finding]:
    reads = [r for r in await _template_reads(ctx) if "result" in r]
    listed = (await ctx.first_pages()).get("resources/list")
    first = next((r.get("uri") for r in (listed.get("resources") or []) if isinstance(r, dict)), None) \
        if isinstance(listed, dict) else None
    if isinstance(first, str):
        try:
            reads.append({"uri": first, "result": await ctx.request("resources/read", {"uri": first})})
        except Exception:  # noqa: BLE001 - a listed resource that fails is not this rule's finding
            pass
    out: list[Finding] = []
    judged = 0
    for read in reads:
        contents = read["result"].get("contents") if isinstance(read["result"], dict) else None
        uris = [c.get("uri") for c in contents or [] if isinstance(c, dict)]
        if not uris:
            continue
        judged += 1
        if read["uri"] not in uris:
            out.append(ctx.fail(f"reading {read['uri']} answered with the contents of {', '.join(map(str, uris[:3]))}",
                                uri=read["uri"]))
    if not judged:
        raise ctx.skip("no read returned contents")
    return out or [ctx.ok(f"{judged} read(s) answered under the URI read")]
