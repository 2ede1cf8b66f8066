"""Upstream targets: from the command line, or from an ``mcpServers`` JSON file as Claude Desktop,
Cursor and most hosts write it::

    {"mcpServers": {
        "files":   {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                    "env": {"NODE_ENV": "production"}},
        "tickets": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ..."}},
        "legacy":  {"type": "sse", "url": "https://old.example.com/sse"},
        "off":     {"command": "x", "disabled": true}
    }}

Each entry's key is its prefix in the proxy (``files_read_file``). ``type`` is ``stdio``, ``http``
(also ``streamable-http``, ``streamableHttp``) or ``sse``; without it, ``url`` means http and
``command`` stdio. ``"scan"`` (off, warn, block) sets that upstream's poisoning scan over
``--scan``. ``${VAR}`` in strings is taken from the environment. A command sees only an
allow-list of the proxy's environment, its ``env``, and what ``inherit_env`` names (``true``: all);
``sandbox`` (``true`` or an object, mcpkit.client.sandbox) confines it, and hides this file from it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

__all__ = ["UpstreamSpec", "load_mcp_servers", "parse_target", "specs_of", "ConfigError"]

_TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamablehttp": "http",
          "streamable_http": "http", "sse": "sse"}
_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def upstream_environment(own: dict[str, str] | None, inherit_env: bool | list[str] | None = None) -> dict[str, str | None]:
    """The ``env`` an upstream's Client gets: its own. A child starts from an allow-list, not from
    the proxy's environment (mcpkit.client.environment); under ``inherit_env: true`` it starts
    from all of it less the proxy's own ``MCPKIT_*`` switches (its gates, audit, limits, store and
    auth are the proxy's; an mcpkit upstream handed ``MCPKIT_READ_ONLY=1`` without a policy of its
    own would refuse to start, docs/environment.md). ``env``, or naming a switch in
    ``inherit_env``, may still pass one."""
    from ..switches import SWITCHES

    unset: dict[str, str | None] = {k: None for k in os.environ if k in SWITCHES} if inherit_env is True else {}
    return {**unset, **(own or {})}


class ConfigError(ValueError):
    """An unusable target or mcpServers file; the message says what to fix."""


@dataclass
class UpstreamSpec:
    """One upstream to mirror: a command (argv) or a URL, and how to reach it."""

    name: str | None
    target: Any
    transport: str = "auto"
    env: dict[str, str] | None = None
    cwd: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: more of the proxy's environment for a command: True (all of it) or names
    inherit_env: bool | list[str] | None = None
    #: a mcpkit.client.sandbox.Sandbox a command runs in, or None
    sandbox: Any = None
    #: this upstream's poisoning scan ("off", "warn", "block"), over --scan (proxy/scan.py)
    scan: str | None = None
    #: the entry's "redact" settings, checked (proxy/redaction.py); over --redact's
    redact: Any = None
    #: the proxy's /readyz waits for it (``"required": false``: listed, not waited for; readiness.py)
    required: bool = True

    def pass_env(self, names: list[str]) -> None:
        """Pass these names of the proxy's environment too (``--pass-env``)."""
        if names and self.inherit_env is not True:
            self.inherit_env = list(dict.fromkeys([*(self.inherit_env or []), *names]))

    def options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`mcpkit.proxy.Upstream`."""
        out: dict[str, Any] = {"transport": self.transport}
        if not isinstance(self.target, str):  # a command: what its process starts with
            out["env"] = upstream_environment(self.env, self.inherit_env)
            if self.inherit_env:
                out["inherit_env"] = self.inherit_env
            if self.sandbox is not None:
                out["sandbox"] = self.sandbox
        if self.cwd:
            out["cwd"] = self.cwd
        if self.headers:
            out["headers"] = self.headers
        return out


def specs_of(targets: list[str], command: list[str] | None, config: str | None,
             headers: list[str] | None, pass_env: list[str] | None = None) -> list[UpstreamSpec]:
    """The upstreams a command line names (``mcpkit proxy``, ``mcpkit pin``): each TARGET, the
    command after ``--``, the servers of an mcpServers file; ``headers`` ('Name: value') go to
    every URL upstream, under its own; ``pass_env`` (--pass-env) names variables every command
    upstream is given beyond the allow-list. Raises ConfigError, also when that names none."""
    from ..client.environment import misnamed

    wrong = misnamed(pass_env or [])
    if wrong:
        raise ConfigError(f'{wrong} (to set a value, give the upstream an "env" in --config)')
    specs = [parse_target(text) for text in targets]
    if command:
        specs.append(UpstreamSpec(None, _as_run(list(command)), "stdio"))
    if config:
        specs.extend(load_mcp_servers(config))
    given = {}
    for item in headers or ():
        key, sep, value = item.partition(":")
        if not sep:
            raise ConfigError(f"--header wants 'Name: value', got {item!r}")
        given[key.strip()] = value.strip()
    for spec in specs:
        if spec.transport != "stdio":
            spec.headers = {**given, **spec.headers}
        else:
            spec.pass_env(pass_env or [])
    if not specs:
        if config:
            raise ConfigError(f'{config} has no enabled server in "mcpServers"')
        raise ConfigError("give a TARGET (a URL or a command line), a command after --, or --config FILE")
    return specs


def parse_target(text: str) -> UpstreamSpec:
    """``[NAME=]TARGET``: a URL (Streamable HTTP; ``sse+https://...`` for legacy SSE), a command
    line as one shell-quoted string; a lone path runs as every other command runs it (a server.py
    is served, a program or ``#!`` script runs as itself)."""
    name = None
    head, eq, rest = text.partition("=")
    if eq and _NAME.fullmatch(head) and rest and "://" not in head:
        name, text = head, rest
    if text.startswith(("sse+http://", "sse+https://")):
        return UpstreamSpec(name, text[4:], "sse")
    if text.startswith(("http://", "https://")):
        return UpstreamSpec(name, text, "http")
    argv = shlex.split(text)
    if not argv:
        raise ConfigError(f"empty target {text!r}: give a URL or a command line")
    return UpstreamSpec(name, _as_run(argv), "stdio")


def _as_run(argv: list[str]) -> list[str]:
    """A lone path runs as it does for every other command (targets.py): a server.py is
    served, a program or a ``#!`` script runs as itself, executable or not."""
    if len(argv) != 1 or not (argv[0].endswith(".py") or os.path.isfile(argv[0])):
        return argv
    from ..targets import TargetError, resolve

    try:
        return resolve(argv[0]).command()
    except TargetError as exc:
        raise ConfigError(str(exc).removeprefix("mcpkit: ")) from None


def _expand(value: Any, where: str) -> Any:
    if isinstance(value, str):
        def sub(match: re.Match[str]) -> str:
            var = match.group(1)
            if var not in os.environ:
                raise ConfigError(f"{where} uses ${{{var}}}, which is not set in the environment")
            return os.environ[var]

        return _VAR.sub(sub, value)
    return value


def load_mcp_servers(path: str | os.PathLike[str]) -> list[UpstreamSpec]:
    """The enabled upstreams of an mcpServers JSON file, in file order."""
    where = os.fspath(path)
    try:
        with open(where, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read {where}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{where} is not valid JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f'{where} has no "mcpServers" object; expected {{"mcpServers": {{"NAME": {{...}}}}}}')
    out = []
    for name, entry in servers.items():
        at = f"{where}: mcpServers.{name}"
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{at}: a name is 1-40 characters from A-Z a-z 0-9 _ - (it becomes the tools' prefix)")
        if not isinstance(entry, dict):
            raise ConfigError(f"{at} must be an object with \"command\" or \"url\"")
        disabled = entry.get("disabled", False)
        if not isinstance(disabled, bool):
            raise ConfigError(f"{at}: disabled must be true or false, got {disabled!r}")
        if disabled:
            continue
        required = entry.get("required", True)
        if not isinstance(required, bool):
            raise ConfigError(f"{at}: required must be true or false, got {required!r}")
        kind = str(entry.get("type") or entry.get("transport") or ("http" if "url" in entry else "stdio")).lower()
        if kind not in _TYPES:
            raise ConfigError(f"{at}: unknown type {kind!r}; use stdio, http or sse")
        kind = _TYPES[kind]
        env = entry.get("env")
        if env is not None and (not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values())):
            raise ConfigError(f"{at}: env must be an object of strings")
        inherit = entry.get("inherit_env")
        if inherit is not None and not isinstance(inherit, bool) and not (
                isinstance(inherit, list) and all(isinstance(v, str) and v for v in inherit)):
            raise ConfigError(f"{at}: inherit_env must be true, false or a list of variable names")
        scan = entry.get("scan")
        if scan is not None and scan not in ("off", "warn", "block"):
            raise ConfigError(f'{at}: scan must be "off", "warn" or "block", got {scan!r}')
        headers = entry.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise ConfigError(f"{at}: headers must be an object of strings")
        sandbox = _sandbox(entry.get("sandbox"), f"{at}.sandbox", where, kind)
        if kind == "stdio":
            command = entry.get("command")
            args = entry.get("args") or []
            if not isinstance(command, str) or not command:
                raise ConfigError(f"{at}: a stdio server needs \"command\" (and optionally \"args\")")
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ConfigError(f"{at}: args must be a list of strings")
            target: Any = [_expand(command, at), *(_expand(a, at) for a in args)]
        else:
            url = _expand(entry.get("url"), at)  # "${BASE}/mcp" is a URL once ${BASE} is read
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigError(f"{at}: an {kind} server needs \"url\": \"https://...\"")
            target = url
        redact = entry.get("redact")
        if redact is not None:
            from .redaction import RedactPolicy

            try:
                RedactPolicy.of(redact, at)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        out.append(UpstreamSpec(
            name, target, kind, redact=redact,
            env={k: _expand(v, at) for k, v in env.items()} if env else None,
            cwd=entry.get("cwd") if isinstance(entry.get("cwd"), str) else None,
            headers={k: _expand(v, at) for k, v in headers.items()},
            inherit_env=inherit if kind == "stdio" and inherit else None, sandbox=sandbox, scan=scan, required=required,
        ))
    return out


def _sandbox(value: Any, at: str, where: str, kind: str) -> Any:
    """An entry's ``sandbox``: None, or a Sandbox that also hides this file (its other entries'
    env and headers hold their secrets)."""
    if value is None or value is False:
        return None
    if kind != "stdio":
        raise ConfigError(f"{at}: a sandbox confines a command; a {kind} server runs elsewhere")
    from ..client.sandbox import Sandbox, SandboxError

    try:
        box = Sandbox.of(value, at)
    except SandboxError as exc:
        raise ConfigError(str(exc)) from None
    return box.hiding([where]) if box is not None else None
