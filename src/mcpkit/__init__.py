"""mcpkit: spec-complete, secure-by-default, fast Model Context Protocol servers.

    from mcpkit import Server

    server = Server("demo")

    @server.tool
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    server.run()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _wiring
from ._lazy import exports

__version__ = "0.1.0"

__all__ = [
    "Server",
    "Client",
    "Context",
    "Middleware",
    "ToolSearch",
    "CallContext",
    "CallNext",
    "ToolError",
    "McpError",
    "ResourceNotFound",
    "PromptNotFound",
    "HostCompatibilityWarning",
    "ClientCapabilityError",
    "ToolResult",
    "Content",
    "text",
    "image",
    "audio",
    "resource",
    "resource_link",
    "user",
    "assistant",
    "__version__",
]

# Everything is re-exported lazily so that `import mcpkit` costs almost nothing
# and serving stdio never imports what it does not use.
_LAZY = {
    "Server": (".server.server", "Server"),
    "Client": (".client", "Client"),
    "Context": (".server.context", "Context"),
    "Middleware": (".server.pipeline", "Middleware"),
    "ToolSearch": (".server.toolsearch", "ToolSearch"),
    "CallContext": (".server.pipeline", "CallContext"),
    "CallNext": (".server.pipeline", "CallNext"),
    "ClientCapabilityError": (".server.context", "ClientCapabilityError"),
    "ToolError": (".protocol.errors", "ToolError"),
    "McpError": (".protocol.errors", "McpError"),
    "ResourceNotFound": (".protocol.errors", "ResourceNotFound"),
    "PromptNotFound": (".protocol.errors", "PromptNotFound"),
    "HostCompatibilityWarning": (".server.server", "HostCompatibilityWarning"),
    "ToolResult": (".server.content", "ToolResult"),
    "Content": (".server.content", "Content"),
    "text": (".server.content", "text"),
    "image": (".server.content", "image"),
    "audio": (".server.content", "audio"),
    "resource": (".server.content", "resource"),
    "resource_link": (".server.content", "resource_link"),
    "user": (".server.content", "user"),
    "assistant": (".server.content", "assistant"),
}

if TYPE_CHECKING:
    from .client import Client
    from .protocol.errors import McpError, PromptNotFound, ResourceNotFound, ToolError
    from .server.content import Content, ToolResult, assistant, audio, image, resource, resource_link, text, user
    from .server.context import ClientCapabilityError, Context
    from .server.pipeline import CallContext, CallNext, Middleware
    from .server.server import HostCompatibilityWarning, Server
    from .server.toolsearch import ToolSearch


__getattr__ = exports(__name__, _LAZY, globals())


def _policy_layer() -> Any:
    """The policy layer (mcpkit/policy/layer.py), imported when a server first needs it."""
    from .policy import layer

    return layer


# the composition root: the server below depends on the policy layer's interface only
# (server/pipeline.py PolicyLayer), and is given the layer here
_wiring.provide_policy_layer(_policy_layer)


def __dir__() -> list[str]:
    return sorted(__all__)
