"""The command line of tool search (server/toolsearch.py) in ``mcpkit proxy``.

``--tool-search`` lists clients a search/call pair (and the ``--search-pinned`` tools) instead of
every upstream's tools; ``--search-limit`` and ``--search-full-list-client`` are ToolSearch's
``limit`` and ``full_list_clients``. The ``--config`` file may say the same with a top-level
``"tool_search"``, ``true`` or ``{"pinned": [...], "limit": 5, "full_list_clients": [...]}``
(the flags win), and each profile with its own ``"tool_search"`` (``false`` turns it off there).
Pinned names are the proxy's names (with the upstream's prefix), fnmatch globs allowed.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .config import ConfigError

__all__ = ["add_proxy_arguments", "parse_setting", "tool_search_of"]

_KEYS = frozenset({"pinned", "limit", "full_list_clients"})


def add_proxy_arguments(parser: argparse.ArgumentParser, positive_int: Any) -> None:
    group = parser.add_argument_group("tool search (docs/tool-search.md)")
    group.add_argument("--tool-search", action="store_true",
                       help="list a search_tools/call_tool pair (and the pinned tools) instead of every tool; "
                       "calls through it are checked, audited and answered as the tool they name")
    group.add_argument("--search-pinned", action="append", default=[], metavar="GLOB",
                       help="a tool listed beside the pair, by the proxy's name or a glob (repeatable)")
    group.add_argument("--search-limit", type=positive_int, metavar="N",
                       help="tools a search returns unless the model asks otherwise (default 5, at most 50)")
    group.add_argument("--search-full-list-client", action="append", default=[], metavar="NAME",
                       help="a clientInfo.name (or glob) listed every tool, e.g. a host that searches by "
                       "itself (repeatable)")


def parse_setting(value: Any, at: str) -> Any:
    """A ToolSearch from a config value (true, false, or an object), or None for false. Raises
    ConfigError naming ``at`` and the fix."""
    if value is False or value is None:
        return None
    if value is True:
        value = {}
    if not isinstance(value, dict):
        raise ConfigError(f'{at} must be true, false or {{"pinned": ["GLOB"], "limit": 5}}, got {value!r}')
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise ConfigError(f"{at}: unknown key(s) {', '.join(unknown)}; it takes {', '.join(sorted(_KEYS))}")
    for key in ("pinned", "full_list_clients"):
        names = value.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f'{at}.{key} must be a list of names or globs, e.g. ["files_read_*"]')
    from ..server.toolsearch import ToolSearch

    try:
        return ToolSearch(pinned=value.get("pinned", []), limit=value.get("limit", 5),
                          full_list_clients=value.get("full_list_clients", []))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{at}: {exc}") from None


def tool_search_of(args: argparse.Namespace) -> Any:
    """The proxy's ToolSearch: the --config file's ``"tool_search"``, with the flags over it;
    None when neither asks for it. Raises ConfigError."""
    setting: Any = None
    if args.config:
        try:
            with open(args.config, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None  # load_mcp_servers has said what is wrong with the file already
        if isinstance(data, dict) and "tool_search" in data:
            setting = data["tool_search"]
            parse_setting(setting, f"{args.config}: tool_search")  # its mistakes, named by the file
    flags = args.search_pinned or args.search_limit is not None or args.search_full_list_client
    if flags and not args.tool_search and not setting:
        raise ConfigError("--search-pinned, --search-limit and --search-full-list-client need --tool-search")
    if not args.tool_search and not setting:
        return None
    merged = dict(setting) if isinstance(setting, dict) else {}
    if args.search_pinned:
        merged["pinned"] = list(args.search_pinned)
    if args.search_limit is not None:
        merged["limit"] = args.search_limit
    if args.search_full_list_client:
        merged["full_list_clients"] = list(args.search_full_list_client)
    return parse_setting(merged, "--tool-search")
