"""Gates: which tools a server lets run, decided from what each tool declares.

A tool declares what it does with ``@server.tool(read_only=True)``, ``destructive=True`` or
``open_world=True``; those become its ToolAnnotations (TL-14) and drive the gates here. A tool
the gates do not permit is left out of ``tools/list`` *and* refused when called by name, from a
batch or meta tool, or as one action of a manager tool: hiding alone is not access control
(TL-11).

Undeclared hints take the spec's defaults (TL-14): a tool that does not say it is read-only is
assumed to write, one that does not say ``destructive=False`` is assumed destructive, and one
that does not say ``open_world=False`` is assumed to reach outside the server. Under gates the
safe reading of silence is the pessimistic one; the refusal message says which declaration or
switch would permit the tool.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Gates", "env_flag", "tool_kinds"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def env_flag(name: str, default: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    """A boolean switch from the environment; a value that is neither yes nor no is an error
    at start-up rather than a silent default (a typo must not open a gate)."""
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r} is not a boolean: use 1/true/yes/on or 0/false/no/off")


def tool_kinds(annotations: Mapping[str, Any] | None) -> tuple[bool, bool, bool]:
    """(read_only, destructive, open_world) with the TL-14 defaults for what is not declared."""
    ann = annotations or {}
    read_only = ann.get("readOnlyHint") is True
    # destructiveHint is meaningful only for tools that write (TL-14)
    destructive = not read_only and ann.get("destructiveHint", True) is not False
    open_world = ann.get("openWorldHint", True) is not False
    return read_only, destructive, open_world


@dataclass(frozen=True, slots=True)
class Gates:
    """The server's switches. By default read-write tools run, destructive and open-world
    ones do not; ``from_env`` reads MCPKIT_READ_ONLY, MCPKIT_ALLOW_DESTRUCTIVE and
    MCPKIT_ALLOW_OPEN_WORLD."""

    read_only: bool = False
    allow_destructive: bool = False
    allow_open_world: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: bool) -> Gates:
        values = {
            "read_only": env_flag("MCPKIT_READ_ONLY", False, environ),
            "allow_destructive": env_flag("MCPKIT_ALLOW_DESTRUCTIVE", False, environ),
            "allow_open_world": env_flag("MCPKIT_ALLOW_OPEN_WORLD", False, environ),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @classmethod
    def open(cls) -> Gates:
        """Every tool permitted (the gates of a server without a policy)."""
        return cls(read_only=False, allow_destructive=True, allow_open_world=True)

    def refusal(self, annotations: Mapping[str, Any] | None) -> str | None:
        """None when a tool with these annotations may run; else why not and what would permit it."""
        read_only, destructive, open_world = tool_kinds(annotations)
        if self.read_only and not read_only:
            return (
                "the server is in read-only mode (MCPKIT_READ_ONLY) and this tool is not declared read-only"
            )
        if destructive and not self.allow_destructive:
            return (
                "destructive tools are disabled: set MCPKIT_ALLOW_DESTRUCTIVE=1 to enable them"
                + ("" if annotations and "destructiveHint" in annotations
                   else " (the tool does not declare destructive=False, so it counts as destructive)")
            )
        if open_world and not self.allow_open_world:
            return (
                "open-world tools are disabled: set MCPKIT_ALLOW_OPEN_WORLD=1 to enable them"
                + ("" if annotations and "openWorldHint" in annotations
                   else " (the tool does not declare open_world=False, so it counts as open-world)")
            )
        return None

    def permits(self, annotations: Mapping[str, Any] | None) -> bool:
        return self.refusal(annotations) is None
