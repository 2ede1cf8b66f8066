"""Hosts: would Claude, OpenAI, Gemini (and the others of mcpkit/hosts.py) take these tools?

Not spec rules: a server can be valid MCP and still fail every session of a host (a root
``oneOf`` makes the Anthropic API refuse the whole request). One rule per host, run for the hosts
``--hosts`` names (default claude, openai, gemini), each failing with one finding that lists the
tools. Advice (info): the spec states none of it. The tool list is checked once, under the first
revision the server accepts: it does not change with the revision.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ...hosts import HOSTS, Host, server_problems
from ..context import CheckContext
from ..model import Finding
from ..registry import rule
from .schema import schema_problem
from .tools import NAME

#: the attribute of the run's Options that remembers which host rules already ran (once a run)
_SEEN = "_hosts_checked"


def _host_rule(host_id: str) -> Callable[[CheckContext], Awaitable[list[Finding]]]:
    host = HOSTS[host_id]

    async def check(ctx: CheckContext) -> list[Finding]:
        first = await ctx.options.settled_first_answer()
        if first and ctx.revision != first:  # read once, on the first connection, as the poisoning scan
            raise ctx.skip(f"the tools are checked under {first}")
        seen: dict[str, str] = ctx.options.__dict__.setdefault(_SEEN, {})
        if host_id in seen:
            raise ctx.skip(f"the tools were checked under {seen[host_id]}")
        seen[host_id] = ctx.revision or "?"  # before any await: connections may run at once
        try:
            tools = await ctx.tools()  # skips when there are none to check
        except BaseException:
            del seen[host_id]  # another revision may still get the list
            raise
        server_name = (ctx.client.server_info or {}).get("name") if ctx.client is not None else None
        spec_broken = _spec_broken(tools, ctx)
        items: list[str] = []
        problems: list[dict[str, Any]] = []
        for problem in server_problems(tools, [host_id], server_name=server_name):
            if (problem.tool, problem.feature) in spec_broken:
                continue  # not valid MCP in the first place: tools.name / schema.input-valid say so
            verb = "would reject" if problem.effect == "rejects" else "would silently drop part of"
            who = f"tool {problem.tool!r}" if problem.tool is not None else "this server"
            note = "" if problem.confirmed else " (reported, not confirmed for every version)"
            items.append(f"{verb} {who}: {problem.message}{note} (source: {problem.source})")
            problems.append({"tool": problem.tool, "feature": problem.feature, "effect": problem.effect,
                             "source": problem.source, "message": problem.message})
        if not problems:
            return [ctx.ok(f"{len(tools)} tool(s) acceptable to {host.name}")]
        # one finding per host, the tools listed in it: a server with many tools gets one line per
        # host, not one per tool and host
        names = sorted({p["tool"] for p in problems if p["tool"] is not None})
        which = f"{len(names)} of {len(tools)} tool(s) ({', '.join(map(repr, names))})" if names else "the tool list"
        return [ctx.fail(f"{host.name} would not take {which} as listed: " + "; ".join(items),
                         host=host_id, tools=names, problems=problems)]

    check.__name__ = f"check_host_{host_id.replace('-', '_')}"
    return check


def _spec_broken(tools: list[dict[str, Any]], ctx: CheckContext) -> set[tuple[str | None, str]]:
    """(tool, feature) pairs the spec rules already fail: a name TL-06 refuses, an inputSchema
    that is not a valid object schema (TL-05). Reported once, there, not again per host."""
    out: set[tuple[str | None, str]] = set()
    for tool in tools:
        name = tool.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            out.add((str(name), "name"))
        if schema_problem(tool.get("inputSchema"), "inputSchema", default_2020=ctx.since("2025-11-25"),
                          object_root=True):
            out.update({(str(name), "root-combinator"), (str(name), "dialect")})
    return out


_FIX = ("for a manager tool keep the default flat schema; for a raw schema with a root oneOf/anyOf pass "
        "flatten=True to add_tool; keep names to [a-zA-Z0-9_-] (64 at most), descriptions under 1024 "
        "characters and the tool count under the host's limit; for schemas you do not write (a proxy's "
        "upstreams, a bridge's mirror) or a host with a subset of its own (openai-strict, gemini-openapi), "
        "Server(..., host_schemas=\"auto\" or the host) or `mcpkit proxy --host-schemas` lists each host a "
        "copy it accepts and still validates calls against the original")
#: not spec text: why these rules exist and where their facts come from
_QUOTE = ("(Not a requirement of the specification: what the hosts that consume MCP servers accept, learned from "
          "their public documentation and from issues showing their own errors, cited in each finding. Advice, so "
          "info, as the spec states none of it: the server is valid MCP, but a host that refuses one tool fails the "
          "user's whole request, e.g. 'input_schema does not support oneOf, allOf, or anyOf at the top level'.)")
_FIXES = {
    "mcpkit": "server.manager(...) advertises a flat schema by default; add_tool(..., flatten=True) for a raw "
              "schema with a root combinator; Server(..., host_schemas=...) for every host's own copy "
              "(docs/hosts.md); `mcpkit check --hosts all` lists every host's limits",
    "sdk": "describe parameters with one flat model (no Union of models at the root); keep tool names to "
           "[a-zA-Z0-9_-]",
    "fastmcp": "avoid a Union of models as the only parameter (it becomes a root anyOf); keep tool names to "
               "[a-zA-Z0-9_-]",
    "ts": "pass z.object({...}) rather than z.union([...]) or .or(...) as inputSchema; keep tool names to "
          "[a-zA-Z0-9_-]",
}



def _sources(host: Host) -> str:
    """Where this host's limits were learned, each once, as docs/rules.md shows them."""
    seen = dict.fromkeys(f"{li.feature}: {li.source}" for li in host.limits)
    return f"mcpkit/hosts.py, each finding names its source; {'; '.join(seen)}"


#: the server of tests/check/fixtures/ each host rule fails on: a root oneOf (root_one_of.py), or
#: only a tool count (129 tools, many_tools.py)
_EXAMPLES = {"cursor": "many_tools", "vscode": "many_tools"}

for _host_id, _host in HOSTS.items():
    rule(
        # advice (info): what hosts accept is no spec text (_QUOTE), and a severity follows the spec's
        # keyword. The requirements cited are the nearest ones: the inputSchema (TL-05) and the name (TL-06).
        f"hosts.{_host_id}", keyword="advice", requirements=("TL-05", "TL-06"),
        title=f"every tool is one {_host.name} accepts as listed",
        fix=_FIX, quote=_QUOTE, source=_sources(_host), fixes=_FIXES,
        example=_EXAMPLES.get(_host_id, "root_one_of"),
    )(_host_rule(_host_id))
