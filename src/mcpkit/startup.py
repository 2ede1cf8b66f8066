"""What a server says about itself when it starts: one line on stderr (never stdout: on stdio that
is the protocol's channel, ST-02), and on a terminal a hint about how to talk to it."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["announce", "startup_line", "policy_summary", "stdio_terminal_hint"]


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def policy_summary(server: Any) -> str:
    """The guard rails in force, in a few words (docs/policy.md)."""
    policy = server.policy
    if policy is None:
        return "policy off"
    parts: list[str] = []
    gates = policy.gates
    if gates is not None:
        if gates.read_only:
            parts.append("read-only")
        else:
            allowed = [w for w, on in (("destructive", gates.allow_destructive),
                                       ("open-world", gates.allow_open_world)) if on]
            hidden = [w for w, on in (("destructive", gates.allow_destructive),
                                      ("open-world", gates.allow_open_world)) if not on]
            if hidden:
                parts.append(f"{' and '.join(hidden)} tools gated")
            if allowed:
                parts.append(f"{' and '.join(allowed)} allowed")
    if policy.sandbox is not None:
        try:
            roots = policy.sandbox.roots
        except Exception:  # noqa: BLE001 - a broken root shows up when a tool uses it
            roots = ()
        parts.append("sandbox " + (", ".join(str(r) for r in roots) if roots else "without roots"))
    if policy.audit is not None:
        path = getattr(policy.audit, "path", None)
        parts.append(f"audit {path}" if path else "audit on stderr")
    if policy.rate_limiter is not None and getattr(policy.rate_limiter, "default", None) is not None:
        parts.append(f"rate {policy.rate_limiter.default}")
    if policy.contract:
        parts.append("contract envelopes")
    return "policy: " + (", ".join(parts) if parts else "on")


def _revisions() -> str:
    from .protocol.revisions import SUPPORTED_VERSIONS

    return ", ".join(SUPPORTED_VERSIONS)


def startup_line(server: Any, transport: str, url: str | None = None) -> str:
    """``mcpkit: weather 1.0 on http://127.0.0.1:8000/mcp | revisions … | 2 tools, … | policy …``"""
    where = url if url else transport
    tools = len(server.tools)
    visible = sum(1 for t in server.tools.values() if server.tool_visible(t))
    tool_text = _count(tools, "tool") + (f" ({tools - visible} gated)" if visible != tools else "")
    resources = len(server._resources) + len(server._templates)
    counts = f"{tool_text}, {_count(resources, 'resource')}, {_count(len(server._prompts), 'prompt')}"
    if server._skills:  # their files are among the resources counted
        counts += f", {_count(len(server._skills), 'skill')}"
    return (f"mcpkit: serving {server.name} {server.version} on {where} | revisions {_revisions()} | "
            f"{counts} | {policy_summary(server)}")


def stdio_terminal_hint(target_text: str) -> str | None:
    """On a terminal, stdio serve would otherwise sit silent: say what it waits for and how to try
    it. None when stdin is not a terminal (a client launched us)."""
    try:
        interactive = sys.stdin.isatty()
    except (AttributeError, ValueError):
        interactive = False
    if not interactive:
        return None
    import shlex

    listed = shlex.join(["mcpkit", "list", target_text]) if target_text else "mcpkit list 'mcpkit serve'"
    dev = shlex.join(["mcpkit", "dev", *([target_text] if target_text else [])])
    return (f"mcpkit: waiting for an MCP client on stdin (Ctrl-D or Ctrl-C to stop). To try it: "
            f"{listed}   or   {dev}")


def announce(line: str, stream: Any = None) -> None:
    """Write ``line`` and its newline in one write, then flush: print() writes them apart, and a
    warning logged by another thread (a bridge connecting) could land between the two."""
    out = sys.stderr if stream is None else stream
    out.write(line + "\n")
    out.flush()
