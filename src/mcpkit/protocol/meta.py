"""Rules for ``_meta`` keys and icons a server publishes (MT-02, MT-03, IC-02). Pure functions."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["FULL_TOOL_LIST", "check_meta", "check_icons", "check_uri_scheme"]

#: a tools/list whose ``params._meta`` sets this to true is answered the whole catalog by a
#: server with tool search (server/toolsearch.py); a mirror (proxy/upstream.py) always asks so
FULL_TOOL_LIST = "dev.mcpkit/fullToolList"

# MT-02: optional prefix of dot-separated labels (letter first, letter or digit last, '-' inside)
# followed by '/', then a name that starts and ends alphanumeric with '-', '_', '.' inside.
_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_KEY = re.compile(rf"(?:(?P<prefix>{_LABEL}(?:\.{_LABEL})*)/)?(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?")
#: RFC 3986 section 3.1
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def check_meta(meta: dict[str, Any] | None, where: str) -> dict[str, Any] | None:
    """ValueError for a key that is malformed (MT-02) or under a prefix MCP reserves (MT-03)."""
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise ValueError(f"{where}: _meta must be an object")
    for key in meta:
        found = _KEY.fullmatch(key) if isinstance(key, str) else None
        if found is None:
            raise ValueError(f"{where}: _meta key {key!r} is malformed (MT-02: 'prefix.example/name')")
        prefix = found.group("prefix")
        if prefix:
            labels = prefix.split(".")
            if len(labels) >= 2 and labels[1] in ("modelcontextprotocol", "mcp"):
                raise ValueError(f"{where}: _meta key {key!r} uses a prefix reserved by MCP (MT-03)")
    return meta


def check_icons(icons: list[dict[str, Any]] | None, where: str) -> list[dict[str, Any]] | None:
    """IC-01/IC-02: each icon has a ``src``; clients render only https: and data: URIs."""
    if icons is None:
        return None
    if not isinstance(icons, list):
        raise ValueError(f"{where}: icons must be a list of {{'src': ...}} objects")
    for icon in icons:
        src = icon.get("src") if isinstance(icon, dict) else None
        if not isinstance(src, str) or not src.lower().startswith(("https:", "data:")):
            raise ValueError(f"{where}: icon src {src!r} must be an https: or data: URI (IC-02: clients reject others)")
        theme = icon.get("theme")
        if theme is not None and theme not in ("light", "dark"):
            raise ValueError(f"{where}: icon theme must be 'light' or 'dark'")
    return icons


def check_uri_scheme(uri: str, where: str) -> str:
    """RS-07: a resource URI starts with an RFC 3986 scheme."""
    if not isinstance(uri, str) or not _SCHEME.match(uri):
        raise ValueError(f"{where}: {uri!r} needs a scheme (RFC 3986) such as 'file:' or 'myapp:' (RS-07)")
    return uri
