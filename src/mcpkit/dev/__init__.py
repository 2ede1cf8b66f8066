"""``mcpkit dev TARGET``: the server over HTTP on loopback plus a browser inspector of our own."""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    from .command import add_parser

    add_parser(sub)
