"""What the package root (mcpkit/__init__.py, the composition root) gives the layers below it.

The server sits below the policy layer and never names it (tests/test_layering.py): what it
needs of the policy without a Policy object in hand (a tool's own ``rate_limit=``, a manager
tool, ``policy=True``, the secret-parameter warning, an HTTP refusal's audit line) it asks the
layer the root provided here, through the interface server/pipeline.py declares (PolicyLayer).
A Policy object brings its own (``Policy.layer``). This module imports nothing: ``import
mcpkit`` stays cheap, and any layer may read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["policy_layer", "provide_policy_layer"]

_provider: Callable[[], Any] | None = None
_layer: Any = None


def provide_policy_layer(provider: Callable[[], Any]) -> None:
    """Give the layers below what returns the policy layer; it is called once, the first time a
    server needs the layer (so importing mcpkit imports no policy module)."""
    global _provider, _layer
    _provider, _layer = provider, None


def policy_layer() -> Any:
    """The policy layer the package root provided."""
    global _layer
    layer = _layer
    if layer is None:
        if _provider is None:  # cannot happen: importing any mcpkit module runs mcpkit/__init__.py first
            raise RuntimeError("no policy layer was provided to the server (mcpkit/__init__.py provides it)")
        layer = _layer = _provider()
    return layer
