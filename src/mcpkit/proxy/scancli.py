"""The command line of the poisoning scan (proxy/scan.py): ``mcpkit proxy --scan warn|block``.

``warn`` is the default: the scan costs one pass over each listing, never a call, and no
real server it was measured on gets an error (docs/security.md), so every proxy says what it
finds; ``block`` also withholds each tool, prompt and resource template with an error finding,
as pinning withholds a drifted one; ``off`` reads nothing. An upstream of a ``--config`` file
may set its own with ``"scan": "off"|"warn"|"block"``.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_proxy_arguments", "screen_for"]


def add_proxy_arguments(parser: argparse.ArgumentParser) -> None:
    from .scan import MODES

    group = parser.add_argument_group("poisoning scan (docs/security.md)")
    group.add_argument("--scan", choices=MODES, default="warn",
                       help="read each listed tool, prompt and resource template for instructions aimed at the "
                       "model (invisible characters, 'ignore previous instructions', secret files, parameters "
                       "asking for secrets or the conversation): warn (default) logs and audits each finding "
                       "once; block also withholds what has an error finding; off")


def screen_for(args: argparse.Namespace, spec: Any, pin: Any, shadows: Any) -> Any:
    """What an Upstream's ``pin=`` gets: the pin, the scan of ``spec``'s mode, or both."""
    from .pincli import key_of
    from .scan import Scan, Screens

    mode = getattr(spec, "scan", None) or args.scan
    if mode == "off":
        return pin
    return Screens(pin, Scan(key_of(spec.name), mode, shadows))
