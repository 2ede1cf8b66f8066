"""``mcpkit proxy --sandbox``: the sandbox of mcpkit.client.sandbox for the single command
upstream given on the command line (an mcpServers file gives each entry its own ``sandbox``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["add_arguments", "apply"]


def add_arguments(parser: argparse.ArgumentParser, count: Callable[[str], int]) -> None:
    """The options, their counts read by ``count`` (the command line's positive whole number)."""
    group = parser.add_argument_group("sandbox of a command upstream (Linux, bubblewrap; docs/security.md)")
    group.add_argument("--sandbox", action="store_true",
                       help="run the command with no network, a read-only filesystem, a private /tmp and "
                       "credentials (~/.ssh, ~/.aws...) hidden")
    group.add_argument("--writable", action="append", default=[], metavar="PATH",
                       help="a path the sandboxed command may write (repeatable)")
    group.add_argument("--hide", action="append", default=[], metavar="PATH",
                       help="a path the sandboxed command sees empty, beyond the credentials hidden anyway (repeatable)")
    group.add_argument("--allow-network", action="store_true", help="let the sandboxed command use the network")
    group.add_argument("--cpu-seconds", type=count, metavar="N", help="CPU seconds per process of the command")
    group.add_argument("--memory-mb", type=count, metavar="N", help="heap megabytes per process of the command")
    group.add_argument("--processes", type=count, metavar="N", help="processes the command may run at once")


def apply(args: argparse.Namespace, specs: list[Any], fail: Callable[[str], BaseException]) -> None:
    """Give the one command upstream the sandbox the options describe; raises ``fail(line)`` for
    options that cannot apply."""
    given = {"writable": args.writable, "hide": args.hide, "network": args.allow_network,
             "cpu_seconds": args.cpu_seconds, "memory_mb": args.memory_mb, "processes": args.processes}
    flags = {"writable": "--writable", "hide": "--hide", "network": "--allow-network", "cpu_seconds": "--cpu-seconds",
             "memory_mb": "--memory-mb", "processes": "--processes"}
    used = [flags[k] for k, v in given.items() if v]
    if not args.sandbox:
        if used:
            raise fail(f"{used[0]} sets up the sandbox; add --sandbox")
        return
    if args.config or len(specs) != 1 or specs[0].transport != "stdio":
        raise fail('--sandbox confines the one command upstream given on the command line; '
                   'in --config give each server its own "sandbox"')
    from ..client.sandbox import Sandbox, SandboxError

    try:
        specs[0].sandbox = Sandbox.of({k: v for k, v in given.items() if v}, "--sandbox")
    except SandboxError as exc:
        raise fail(str(exc).replace("--sandbox.", "--")) from None
