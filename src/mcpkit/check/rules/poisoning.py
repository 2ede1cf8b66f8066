"""Security: tool poisoning, what a tool, prompt or resource template says to the model that its
user does not see (the detectors are proxy/scan.py's, which ``mcpkit proxy --scan`` runs too).

One pass over the lists a connection has anyway (cached per connection); each rule reports its
own findings. Every revision lists the same definitions, and one finding per item is what a
reader wants: they are read on one connection, the first one's (the newest handshake revision,
or the one the server answered it with when it speaks only older ones), so a server that does
not speak 2025-11-25 is read too.
"""

from __future__ import annotations

from typing import Any

from ...proxy.scan import LONG_DESCRIPTION, RULES, Finding, scan_listing
from ..context import CheckContext, Skip
from ..model import Finding as Result
from ..registry import LEGACY, rule

_QUOTE = ("Tools represent arbitrary code execution and must be treated with appropriate caution. In "
          "particular, descriptions of tool behavior such as annotations should be considered untrusted, "
          "unless obtained from a trusted server.")
_SOURCE = "2025-11-25/index#security-and-trust--safety (Tool Safety)"
_LISTS = (("tools/list", "tools", "tools"), ("prompts/list", "prompts", "prompts"),
          ("resources/templates/list", "resourceTemplates", "resources"))


async def _findings(ctx: CheckContext) -> list[Finding]:
    """The scan of every tool, prompt and resource template the server lists (once per connection)."""
    if "poisoning" not in ctx.cache:
        listing: dict[str, list[dict[str, Any]]] = {}
        for method, key, capability in _LISTS:
            if ctx.has(capability):
                try:
                    listing[key] = await ctx.listing(method, key)
                except Skip:
                    listing[key] = []  # a failing list is reported by capabilities.backed
        ctx.cache["poisoning"] = (scan_listing(listing), sum(map(len, listing.values())))
    return ctx.cache["poisoning"]  # type: ignore[no-any-return]


async def _report(ctx: CheckContext, rule_id: str) -> list[Result]:
    first = await ctx.options.settled_first_answer()
    if first is not None and ctx.revision != first:  # None: no first connection to wait for
        raise Skip(f"read once, on the {first or 'first'} connection")
    found, count = await _findings(ctx)
    out = [ctx.fail(f.line(), kind=f.kind, item=f.item, path=f.path, excerpt=f.excerpt)
           for f in found if f.rule == rule_id]
    return out or [ctx.ok(f"{count} item(s) read")]


def _poisoning_rule(rule_id: str, *, keyword: str, fixes: str) -> Any:
    severity, title, fix = RULES[rule_id]
    assert {"MUST": "error", "SHOULD": "warning"}[keyword] == severity, rule_id

    @rule(rule_id, keyword=keyword, requirements=("TL-14", "TL-11"), revisions=LEGACY, title=title,
          fix=fix, quote=_QUOTE, source=_SOURCE, example="poisoned",
          fixes=dict.fromkeys(("mcpkit", "sdk", "fastmcp", "ts"), fixes))
    async def check(ctx: CheckContext) -> list[Result]:
        return await _report(ctx, rule_id)

    return check


#: rule id -> (the keyword that gives proxy/scan.py's severity, how to fix it in any framework)
_FIXES = {
    "security.invisible-characters": (
        "MUST", "retype the text (a paste from a web page or a document can carry zero-width or bidi characters); "
        "nothing legitimate needs them in a definition"),
    "security.model-instructions": (
        "MUST", "rewrite the docstring or description as what the tool does and returns; if you did not write it, "
        "stop using the server"),
    "security.suspicious-instructions": (
        "SHOULD", "say what the tool does; leave which tools to call, files to read or addresses to send to for the "
        "model and the user to decide"),
    "security.context-parameters": (
        "MUST", "remove the parameter; a tool that needs text takes that text, never the conversation or the "
        "model's instructions"),
    "security.secret-parameters": (
        "SHOULD", "read the secret from the server's environment or configuration (or use OAuth, docs/auth.md) "
        "instead of a parameter the model fills in"),
    "security.long-description": (
        "SHOULD", f"keep descriptions under {LONG_DESCRIPTION} characters; move reference material into a resource"),
}
for _id, (_keyword, _fix) in _FIXES.items():
    _poisoning_rule(_id, keyword=_keyword, fixes=_fix)
