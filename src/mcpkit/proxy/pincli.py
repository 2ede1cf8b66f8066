"""The command line of pinning (proxy/pin.py): ``mcpkit pin`` and the ``--pin`` options.

    mcpkit pin lock.json -- npx -y @modelcontextprotocol/server-filesystem /srv   write or refresh
    mcpkit pin lock.json files="npx ... /srv" web=https://example.com/mcp          several, named
    mcpkit pin --check lock.json -- python server.py                               exit 1 on drift

``mcpkit proxy --pin FILE`` (``--pin-strict``) and ``mcpkit check --pin FILE`` take their option
from here. An upstream's key in the lockfile is its NAME (``NAME=TARGET`` or the ``--config``
key), or ``default`` for one unnamed target, as ``mcpkit proxy`` names it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

__all__ = ["add_check_arguments", "add_proxy_arguments", "key_of", "listed", "lockfile_for_proxy", "register", "run",
           "usable_lockfile"]

#: the lockfile key of an unnamed single upstream
DEFAULT_KEY = "default"


def key_of(name: str | None) -> str:
    return name or DEFAULT_KEY


def add_proxy_arguments(parser: argparse.ArgumentParser) -> None:
    """``mcpkit proxy``'s pinning options."""
    group = parser.add_argument_group("pinning (docs/security.md)")
    group.add_argument("--pin", metavar="FILE",
                       help="a lockfile of the upstream tools' definitions: each is pinned on first sight, and one "
                       "that changes later is withheld (not listed, its calls refused)")
    group.add_argument("--pin-strict", action="store_true",
                       help="with --pin: also withhold what the lockfile has no entry for (write it with mcpkit pin)")


def add_check_arguments(group: Any) -> None:
    """``mcpkit check``'s pinning options (the rule security.pin-drift)."""
    group.add_argument("--pin", metavar="FILE",
                       help="fail (security.pin-drift) when the tools, prompts or resource templates differ from "
                       "this lockfile (written by mcpkit pin)")
    group.add_argument("--pin-key", metavar="NAME", default=DEFAULT_KEY,
                       help=f"the server's entry in the --pin lockfile (its NAME there; default: {DEFAULT_KEY})")


def usable_lockfile(path: str) -> Any:
    """The Lockfile at ``path`` for ``mcpkit check --pin``; raises PinError (a ValueError) when it
    cannot be read or does not exist, naming the fix."""
    from .pin import Lockfile, PinError

    lock = Lockfile.load(path)
    if not lock.exists:
        raise PinError(f"the lockfile {path} does not exist; write it with `mcpkit pin {path} TARGET`")
    return lock


def lockfile_for_proxy(args: argparse.Namespace, fail: Any) -> Any:
    """The Lockfile ``--pin`` names, or None; ``fail(message)`` makes the one-line exit."""
    from .pin import Lockfile, PinError

    if args.pin_strict and not args.pin:
        raise fail("--pin-strict needs --pin FILE")
    if not args.pin:
        return None
    try:
        lock = Lockfile.load(args.pin)
    except PinError as exc:
        raise fail(str(exc)) from None
    if args.pin_strict and not lock.exists:
        raise fail(f"--pin-strict withholds every tool not in {args.pin}, which does not exist: write it first "
                   f"with `mcpkit pin {args.pin} TARGET`")
    return lock


def register(sub: Any) -> None:
    p = sub.add_parser("pin", help="write or refresh a lockfile of MCP servers' tool definitions, printing the "
                       "changes (--check: exit 1 on drift)")
    p.add_argument("file", metavar="FILE", help="the lockfile (JSON), as mcpkit proxy --pin reads it")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="[NAME=]URL or [NAME=]\"command line\"; or give one command after --")
    p.add_argument("--config", metavar="FILE", help="an mcpServers JSON file (Claude Desktop, Cursor)")
    p.add_argument("--header", action="append", metavar="'NAME: VALUE'", help="an HTTP header for URL targets")
    p.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                   help="pass this variable to command servers (repeatable; they get only the allow-list of "
                   "docs/proxy.md and their own env otherwise)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when what is served drifted")
    p.set_defaults(func=run, command_tail=None)


def _fail(message: str) -> SystemExit:
    return SystemExit(f"mcpkit pin: {message}")


def _specs(args: argparse.Namespace) -> list[Any]:
    from .config import ConfigError, specs_of

    try:
        specs = specs_of(args.targets, args.command_tail, args.config, args.header, args.pass_env)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    if len(specs) > 1 and any(not s.name for s in specs):
        raise _fail("several servers need a name each, their key in the lockfile: NAME=TARGET, or --config")
    return specs


async def listed(client: Any) -> dict[str, dict[str, Any]]:
    """``{kind: {name: entry}}`` of what a connected Client's server lists now."""
    from .pin import KEYS, entry_of

    caps = client.server_capabilities
    out: dict[str, dict[str, Any]] = {kind: {} for kind in KEYS}
    items = {"tools": await client.list_tools() if "tools" in caps else [],
             "prompts": await client.list_prompts() if "prompts" in caps else [],
             "resourceTemplates": await client.list_resource_templates() if "resources" in caps else []}
    for kind, found in items.items():
        for desc in found:
            if isinstance(desc, dict) and isinstance(desc.get(KEYS[kind]), str):
                out[kind][desc[KEYS[kind]]] = entry_of(kind, desc)
    return out


async def _list(spec: Any) -> dict[str, dict[str, Any]]:
    from ..client import Client

    options = {k: v for k, v in spec.options().items() if k in ("transport", "env", "inherit_env", "cwd", "headers", "sandbox")}
    async with Client(spec.target, **options) as client:
        return await listed(client)


def diff_lines(key: str, pinned: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What changed for one upstream, one line per item (and a short diff of a description)."""
    from .pin import SINGULAR, describe_drift, drift

    found = drift(pinned, now)
    lines = [f"{key}: + {SINGULAR[kind]} {name}" for kind, name in found["added"]]
    lines += [f"{key}: - {SINGULAR[kind]} {name}" for kind, name in found["removed"]]
    for kind, name in found["changed"]:
        text = describe_drift(kind, name, pinned[kind][name], now[kind][name])
        head, _, rest = text.partition("\n")
        lines.append(f"{key}: ~ {head}")
        lines += [f"    {line}" for line in rest.splitlines()]
    return lines


def run(args: argparse.Namespace) -> int:
    from ..client import ClientError
    from .pin import Lockfile, PinError, drift

    specs = _specs(args)
    try:
        lock = Lockfile.load(args.file)
    except PinError as exc:
        raise _fail(str(exc)) from None
    lines: list[str] = []
    changes = 0
    for spec in specs:
        key = key_of(spec.name)
        try:
            now = asyncio.run(_list(spec))
        except (ClientError, OSError) as exc:
            raise _fail(f"could not list {key!r}: {exc}") from None
        changes += sum(map(len, drift(lock.upstream(key), now).values()))
        lines += diff_lines(key, lock.upstream(key), now)
        lock.replace(key, now)
    for line in lines:
        print(line)
    if args.check:
        if changes:
            print(f"mcpkit pin: {args.file} does not match what is served ({changes} change(s) above); "
                  f"review it and run `mcpkit pin {args.file} ...` without --check to accept it", file=sys.stderr)
            return 1
        return 0
    if changes or not lock.exists:
        try:
            lock.save()
        except PinError as exc:
            raise _fail(str(exc)) from None
    print(f"mcpkit pin: {args.file}: {f'{changes} change(s) written' if changes else 'no change'}", file=sys.stderr)
    return 0
