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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# a yes/no switch is read as every switch of the table is (mcpkit/switches.py): a typo is an error
from ..switches import env_flag

__all__ = ["Gates", "SWITCHES", "env_flag", "tool_kinds"]


def tool_kinds(annotations: Mapping[str, Any] | None) -> tuple[bool, bool, bool]:
    """(read_only, destructive, open_world) with the TL-14 defaults for what is not declared."""
    ann = annotations or {}
    read_only = ann.get("readOnlyHint") is True
    # destructiveHint is meaningful only for tools that write (TL-14)
    destructive = not read_only and ann.get("destructiveHint", True) is not False
    open_world = ann.get("openWorldHint", True) is not False
    return read_only, destructive, open_world


#: the switches' fields and the name each gets after the prefix (``MCPKIT_READ_ONLY``, ...)
SWITCHES = {"read_only": "READ_ONLY", "allow_destructive": "ALLOW_DESTRUCTIVE", "allow_open_world": "ALLOW_OPEN_WORLD"}


@dataclass(frozen=True, slots=True)
class Gates:
    """The server's switches. By default read-write tools run, destructive and open-world
    ones do not; ``from_env`` reads MCPKIT_READ_ONLY, MCPKIT_ALLOW_DESTRUCTIVE and
    MCPKIT_ALLOW_OPEN_WORLD, or names of the server's own (``prefix=`` or ``names=``), so a
    server keeps its documented ``READ_ONLY_MODE`` / ``ALLOW_DANGEROUS_OPS``.

    ``switches`` records where each switch was set: field -> the environment variable that
    sets it, a command-line flag (``--read-only``: mcpkit serve or proxy; ``--deny-destructive``:
    mcpkit proxy), or None when the server's code does; refusals name what would change the
    answer. ``declared_in`` is where the tools' declarations are made: None for the server's code,
    or an option such as ``--tool-policy`` (mcpkit proxy, whose tools are another server's).
    """

    read_only: bool = False
    allow_destructive: bool = False
    allow_open_world: bool = False
    switches: tuple[tuple[str, str | None], ...] = field(default=(), compare=False)
    declared_in: str | None = field(default=None, compare=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, prefix: str = "MCPKIT_",
                 names: Mapping[str, str] | None = None, **overrides: bool | None) -> Gates:
        """The switches from the environment: ``{prefix}READ_ONLY``, ``{prefix}ALLOW_DESTRUCTIVE``,
        ``{prefix}ALLOW_OPEN_WORLD``, or the variables ``names`` gives per field
        (``{"read_only": "READ_ONLY_MODE", "allow_destructive": "ALLOW_DANGEROUS_OPS"}``).
        ``overrides`` set a switch in code (the environment is not read for it)."""
        unknown = sorted(set(names or {}) - set(SWITCHES)) + sorted(set(overrides) - set(SWITCHES))
        if unknown:
            raise ValueError(f"unknown gate switch(es) {', '.join(unknown)}; the switches are {', '.join(SWITCHES)}")
        env_names = {field: (names or {}).get(field, prefix + suffix) for field, suffix in SWITCHES.items()}
        values: dict[str, bool] = {}
        where: list[tuple[str, str | None]] = []
        for field, name in env_names.items():
            given = overrides.get(field)
            if given is not None:
                values[field] = bool(given)
                where.append((field, None))
            else:
                values[field] = env_flag(name, False, environ)
                where.append((field, name))
        return cls(**values, switches=tuple(where))

    @classmethod
    def open(cls) -> Gates:
        """Every tool permitted (the gates of a server without a policy)."""
        return cls(read_only=False, allow_destructive=True, allow_open_world=True)

    def switch(self, field: str) -> str | None:
        """The environment variable that sets ``field``, or None when it is set in code."""
        return dict(self.switches).get(field)

    def _flag(self, field: str) -> str | None:
        """The command-line flag that set ``field`` (mcpkit proxy), or None."""
        name = self.switch(field)
        return name if name is not None and name.startswith("--") else None

    def _enable(self, field: str, what: str) -> str:
        flag = self._flag(field)
        if flag is not None:
            return f"drop {flag} to enable {what}"
        name = self.switch(field)
        if name is not None:
            return f"set {name}=1 to enable them"
        return f"the server's code sets {field}=False (Gates / Policy.secure); change it there to enable {what}"

    def refusal(self, annotations: Mapping[str, Any] | None) -> str | None:
        """None when a tool with these annotations may run; else why not and what would permit it."""
        read_only, destructive, open_world = tool_kinds(annotations)
        if self.read_only and not read_only:
            name = self.switch("read_only")
            how = (f"{name} is given" if self._flag("read_only") else f"{name} is set" if name is not None
                   else "set in the server's code")
            return f"the server is in read-only mode ({how}) and this tool is not declared read-only"
        if destructive and not self.allow_destructive:
            return (
                f"destructive tools are disabled: {self._enable('allow_destructive', 'them')}"
                + ("" if annotations and "destructiveHint" in annotations
                   else " (the tool does not declare destructive=False, so it counts as destructive)")
            )
        if open_world and not self.allow_open_world:
            return (
                f"open-world tools are disabled: {self._enable('allow_open_world', 'them')}"
                + ("" if annotations and "openWorldHint" in annotations
                   else " (the tool does not declare open_world=False, so it counts as open-world)")
            )
        return None

    def explain(self, annotations: Mapping[str, Any] | None) -> str | None:
        """One line for start-up: why a tool with these annotations is hidden and the fix, or None."""
        read_only, destructive, open_world = tool_kinds(annotations)
        ann = annotations or {}
        if self.read_only and not read_only:
            flag = self._flag("read_only")
            if flag is not None and self.declared_in is not None:
                return (f"hidden, not declared read-only under {flag}; set read_only = true for it in "
                        f"{self.declared_in}, or drop {flag}")
            if flag is not None:
                return f"hidden, not declared read-only under {flag}; declare read_only=True or drop {flag}"
            name = self.switch("read_only")
            switch = f"unset {name}" if name is not None else "turn read-only mode off in the server's code"
            return f"hidden, not declared read-only in read-only mode; declare read_only=True or {switch}"
        if destructive and not self.allow_destructive:
            flag = self._flag("allow_destructive")
            if flag is not None:
                where = f"set destructive = false for it in {self.declared_in}" if self.declared_in else \
                    "declare destructive=False"
                return (f"hidden, {'destructive' if 'destructiveHint' in ann else 'destructive undeclared'}; "
                        f"{where}, or drop {flag}")
            name = self.switch("allow_destructive")
            switch = f"set {name}=1" if name is not None else "allow destructive tools in the server's code"
            why = "destructive" if "destructiveHint" in ann else "destructive undeclared"
            fix = "declare destructive=False or " if "destructiveHint" not in ann else ""
            return f"hidden, {why}; {fix}{switch}"
        if open_world and not self.allow_open_world:
            flag = self._flag("allow_open_world")
            if flag is not None:
                where = f"set open_world = false for it in {self.declared_in}" if self.declared_in else \
                    "declare open_world=False"
                return (f"hidden, {'open-world' if 'openWorldHint' in ann else 'open_world undeclared'}; "
                        f"{where}, or drop {flag}")
            name = self.switch("allow_open_world")
            switch = f"set {name}=1" if name is not None else "allow open-world tools in the server's code"
            why = "open-world" if "openWorldHint" in ann else "open_world undeclared"
            fix = "declare open_world=False or " if "openWorldHint" not in ann else ""
            return f"hidden, {why}; {fix}{switch}"
        return None

    def permits(self, annotations: Mapping[str, Any] | None) -> bool:
        return self.refusal(annotations) is None
