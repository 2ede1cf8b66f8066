"""Capabilities: every declared capability is backed by its methods."""

from __future__ import annotations

from typing import Any

from ..context import CheckContext, describe
from ..model import Finding
from ..registry import rule

METHOD_NOT_FOUND = -32601


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
    "capabilities.backed", severity="error",
    requirements=("LC-06", "VN-04", "TL-01", "RS-01", "RS-10", "PM-01", "LG-02", "CP-01"),
    title="every declared capability is backed: its methods exist and answer",
    fix="declare only what you serve: implement the methods of each declared capability "
    "(tools/list, resources/list, resources/subscribe, prompts/list, logging/setLevel, completion/complete) "
    "or drop the capability",
)
async def check_backed(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    checked: list[str] = []
    pages = await ctx.first_pages()
    for method, result in pages.items():
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
    return out or [ctx.ok(f"{len(checked)} method(s) of the declared capabilities answer: {', '.join(checked)}")]
