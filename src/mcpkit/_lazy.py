"""Lazy re-exports: a package names what it offers, and each name is imported on first use.

``import mcpkit`` (or ``mcpkit.policy``, ``mcpkit.auth``) then costs almost nothing, and
serving stdio never imports what it does not use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["exports"]


def exports(package: str, table: dict[str, tuple[str, str]], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps a public name to (module relative
    to the package, attribute); the value is cached in ``namespace`` once imported."""

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(target[0], package), target[1])
        namespace[name] = value
        return value

    return __getattr__
