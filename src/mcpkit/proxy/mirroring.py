"""Small pieces of mirroring an upstream (upstream.py): registering an item with what of the
upstream's extras passes the checks, naming a target, and what a listed schema holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["done_now", "has_root_combinator", "is_server", "label", "register"]


def register(add: Callable[..., Any], desc: dict[str, Any]) -> Any:
    """Register with the upstream's icons and _meta; without them when they do not pass the
    checks (a bad icon should not cost the item)."""
    extra = {k: desc[w] for k, w in (("icons", "icons"), ("meta", "_meta")) if desc.get(w)}
    try:
        return add(**extra)
    except ValueError:
        if not extra:
            raise
        return add()


async def done_now(value: Any) -> Any:
    return value


def is_server(target: Any) -> bool:
    from ..server.server import Server

    return isinstance(target, Server)


def label(target: Any) -> str:
    if isinstance(target, str):
        return target if len(target) <= 60 else target[:59] + "…"
    if isinstance(target, (list, tuple)):
        return label(" ".join(map(str, target)))
    return getattr(target, "name", None) or type(target).__name__


def has_root_combinator(schema: Any) -> bool:
    return isinstance(schema, dict) and any(k in schema for k in ("oneOf", "anyOf", "allOf"))
