"""Capabilities: every declared capability is backed by its methods."""

from __future__ import annotations

from typing import Any

from ..context import CheckContext, describe
from ..model import Finding
from ..registry import LEGACY, rule

METHOD_NOT_FOUND = -32601
#: methods a capability offers but does not oblige a server to serve: RS-01/RS-03 make templates
#: an optional part of ``resources`` (no requirement says a server with resources has templates),
#: so -32601 there is a server without templates, not an unbacked capability. Any other failure of
#: a method the server does serve still counts.
OPTIONAL_METHODS = frozenset({"resources/templates/list"})


async def _completion_ref(ctx: CheckContext) -> tuple[dict[str, Any], str]:
    """A completion reference the server has (a prompt argument or a template variable), if any."""
    pages = await ctx.first_pages()
    prompts = pages.get("prompts/list")
    if isinstance(prompts, dict):
        for prompt in prompts.get("prompts") or []:
            args = prompt.get("arguments") if isinstance(prompt, dict) else None
            if isinstance(args, list) and args and isinstance(args[0], dict):
                return {"type": "ref/prompt", "name": prompt.get("name")}, str(args[0].get("name"))
    templates = pages.get("resources/templates/list")
    if isinstance(templates, dict):
        for template in templates.get("resourceTemplates") or []:
            text = template.get("uriTemplate") if isinstance(template, dict) else None
            if isinstance(text, str) and "{" in text:
                variable = text.split("{", 1)[1].split("}", 1)[0].lstrip("+#./;?&").split(",")[0].split(":")[0]
                return {"type": "ref/resource", "uri": text}, variable.rstrip("*")
    return {"type": "ref/prompt", "name": "mcpkit-check-no-such-prompt"}, "x"


async def _subscribe_uri(ctx: CheckContext) -> str:
    pages = await ctx.first_pages()
    listed = pages.get("resources/list")
    if isinstance(listed, dict):
        for resource in listed.get("resources") or []:
            if isinstance(resource, dict) and isinstance(resource.get("uri"), str):
                return resource["uri"]
    return "mcpkit-check://no-such-resource"


def _failure(ctx: CheckContext, capability: str, method: str, exc: BaseException) -> Finding:
    if getattr(exc, "code", None) == METHOD_NOT_FOUND:
        return ctx.fail(f"the server declares {capability} but {method} is an unknown method (-32601)", method=method)
    return ctx.fail(f"the server declares {capability} but {method} failed: {describe(exc)}", method=method)


@rule(
    "capabilities.backed", example="absent_list_changed",
    keyword="MUST",
    requirements=("LC-06", "VN-04", "TL-01", "RS-01", "RS-10", "PM-01", "LG-02", "CP-01", "TK-01"),
    title="every declared capability is backed: its methods exist and answer",
    fix="declare only what you serve: implement the methods of each declared capability "
    "(tools/list, resources/list, resources/subscribe, prompts/list, logging/setLevel, completion/complete, "
    "tasks/list, tasks/cancel) or drop the capability",
    quote="Servers that support tools MUST declare the tools capability. (schema, ServerCapabilities.tools: "
    "Present if the server offers any tools to call; likewise resources, prompts, logging, completions.)",
    source="server/tools#capabilities, schema ServerCapabilities",
    fixes={
        "mcpkit": "built in: capabilities are derived from what is registered",
        "sdk": "with the low-level Server, declare only the handlers you register; MCPServer derives them",
        "fastmcp": "built in: capabilities follow what is registered",
        "ts": "register the handler of every capability you pass to new Server(info, {capabilities}); "
        "McpServer declares them as you register tools/resources/prompts",
    },
    reproduce="calls the first page of every declared list, resources/subscribe and unsubscribe, "
    "logging/setLevel, completion/complete, and (2025-11-25) tasks/list and tasks/cancel of a made-up task "
    "when tasks.list/tasks.cancel are declared; -32601 for any of them fails",
)
async def check_backed(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    checked: list[str] = []
    pages = await ctx.first_pages()
    optional: list[str] = []
    for method, result in pages.items():
        if method in OPTIONAL_METHODS and getattr(result, "code", None) == METHOD_NOT_FOUND:
            optional.append(method)
            continue
        checked.append(method)
        if isinstance(result, Exception):
            out.append(_failure(ctx, method.split("/")[0], method, result))
    probes: list[tuple[str, str, dict[str, Any], bool]] = []
    if not ctx.modern:  # 2026-07-28: subscribe means subscriptions/listen, and logging has no method
        if ctx.capability("resources", "subscribe") is True:
            uri = await _subscribe_uri(ctx)
            probes.append(("resources.subscribe", "resources/subscribe", {"uri": uri}, False))
            probes.append(("resources.subscribe", "resources/unsubscribe", {"uri": uri}, False))
        if ctx.has("logging"):
            probes.append(("logging", "logging/setLevel", {"level": "info"}, True))
    if ctx.revision == "2025-11-25":  # the core tasks of 2025-11-25 (TK-01); 2026-07-28 moved them to an extension
        if ctx.capability("tasks", "list") is not None:
            probes.append(("tasks.list", "tasks/list", {}, True))
        if ctx.capability("tasks", "cancel") is not None:
            # a made-up task: -32602 (TK-14) shows the method is there; -32601 that it is not
            probes.append(("tasks.cancel", "tasks/cancel", {"taskId": "mcpkit-check-no-such-task"}, False))
    if ctx.has("completions"):
        ref, argument = await _completion_ref(ctx)
        probes.append(("completions", "completion/complete", {"ref": ref, "argument": {"name": argument, "value": ""}},
                       False))
    for capability, method, params, must_succeed in probes:
        checked.append(method)
        try:
            await ctx.request(method, params)
        except Exception as exc:  # noqa: BLE001
            if must_succeed or getattr(exc, "code", None) in (METHOD_NOT_FOUND, None):
                out.append(_failure(ctx, capability, method, exc))
    if not checked:
        raise ctx.skip("the server declares no capability with methods")
    unserved = f" ({', '.join(optional)}: not served, which the spec allows)" if optional else ""
    return out or [ctx.ok(f"{len(checked)} method(s) of the declared capabilities answer: {', '.join(checked)}"
                          + unserved)]


#: list method -> (result key, the capability that must be declared to serve it)
_SERVED = {"tools/list": ("tools", "tools"), "resources/list": ("resources", "resources"),
           "prompts/list": ("prompts", "prompts")}


@rule(
    "capabilities.declared", example="prompts_undeclared", keyword="MUST", requirements=("LC-06", "TL-01", "RS-01"),
    title="what is served is declared: a list with items (tools, resources, prompts) has its capability",
    fix="declare the capability of every feature you serve (prompts: {}, tools: {}, resources: {}) in the "
    "initialize result (server/discover in 2026-07-28), or stop serving it",
    quote="Servers that support prompts MUST declare the prompts capability during initialization. "
    "(Likewise tools and resources; lifecycle: both parties declare the features they support.)",
    source="server/prompts#capabilities, server/tools#capabilities, server/resources#capabilities",
    fixes={
        "mcpkit": "built in: capabilities are derived from what is registered",
        "sdk": "with the low-level Server, capabilities come from the handlers you register; "
        "do not strip them from the initialization options",
        "fastmcp": "built in",
        "ts": "pass the capability to new Server(info, {capabilities}) for every handler you set",
    },
    reproduce="for each of tools, resources and prompts that the server does not declare, calls its list "
    "method once; a list that answers with items fails (an empty list or an error passes)",
)
async def check_declared(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    asked = []
    for method, (key, capability) in _SERVED.items():
        if ctx.capability(capability) is not None:
            continue
        asked.append(method)
        try:
            result = await ctx.request(method)
        except Exception:  # noqa: BLE001 - an error is what an undeclared feature gets
            continue
        items = result.get(key) if isinstance(result, dict) else None
        if isinstance(items, list) and items:
            names = [str(i.get("uri" if key == "resources" else "name")) for i in items[:5] if isinstance(i, dict)]
            out.append(ctx.fail(f"{method} serves {len(items)} item(s) ({', '.join(names)}) but the {capability} "
                                "capability is not declared", method=method))
    if not asked:
        raise ctx.skip("tools, resources and prompts are all declared")
    return out or [ctx.ok(f"{', '.join(asked)}: nothing served undeclared")]


#: list method -> (result key, the capability holding listChanged, the notification)
_CHANGES = {
    "tools/list": ("tools", "tools", "notifications/tools/list_changed"),
    "resources/list": ("resources", "resources", "notifications/resources/list_changed"),
    "prompts/list": ("prompts", "prompts", "notifications/prompts/list_changed"),
}


def _names(items: list[dict[str, Any]], key: str) -> set[str]:
    field = "uri" if key == "resources" else "name"
    return {str(item.get(field)) for item in items}


@rule(
    "capabilities.list-changed", example="lazy_tools",
    keyword="SHOULD", requirements=("TL-13", "RS-09", "PM-07"), revisions=LEGACY,
    order=90,
    title="a list declared with listChanged that changes during the connection is announced with a "
    "list_changed notification",
    fix="send notifications/tools/list_changed (resources/, prompts/) whenever the list changes, "
    "or leave listChanged out of the capability",
    quote="When the list of available tools changes, servers that declared the listChanged capability SHOULD "
    "send a notification. (The same for resources and prompts.)",
    source="server/tools#list-changed-notification, server/resources, server/prompts",
    fixes={
        "mcpkit": "built in: adding or removing a tool on a running Server notifies every session",
        "sdk": "call ctx.session.send_tool_list_changed() (resource_/prompt_) after changing the list",
        "fastmcp": "built in for add_tool/remove_tool inside a request; otherwise send the notification yourself",
        "ts": "built in for McpServer registerTool/remove/enable/disable; otherwise call server.sendToolListChanged()",
    },
)
async def check_list_changed(ctx: CheckContext) -> list[Finding]:
    """The lists are read again after every other rule ran on this connection; a list that
    changed without its notification fails. The first read is the one the other rules used."""
    declared = [m for m, (_, cap, _) in _CHANGES.items() if ctx.capability(cap, "listChanged") is True]
    if not declared:
        raise ctx.skip("no capability declares listChanged")
    out: list[Finding] = []
    compared = 0
    for method in declared:
        key, _, notification = _CHANGES[method]
        try:
            earlier = [await ctx.listing(method, key)]  # the read the other rules used (cached)
            after = await ctx.read_list(method, key)
        except Exception:  # noqa: BLE001 - a failing list is capabilities.backed's finding
            continue
        first = (await ctx.first_pages()).get(method)
        if isinstance(first, dict) and isinstance(first.get(key), list) and first.get("nextCursor") is None:
            earlier.insert(0, [i for i in first[key] if isinstance(i, dict)])  # the whole list, read first
        compared += 1
        new = _names(after, key)
        old = next((names for names in (_names(e, key) for e in earlier) if names != new), new)
        told = any(n.get("method") == notification for n in ctx.client.notifications)
        if old != new and not told:
            added, removed = sorted(new - old), sorted(old - new)
            what = "; ".join(p for p in (f"added {added}" if added else "", f"removed {removed}" if removed else "")
                             if p)
            out.append(ctx.fail(f"{method} changed during the connection ({what}) without {notification}",
                                method=method))
    if not compared:
        raise ctx.skip("no list with listChanged could be read")
    return out or [ctx.ok(f"{compared} list(s) with listChanged: unchanged, or announced")]
