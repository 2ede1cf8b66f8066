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

__version__ = "0.1.0"

__all__ = [
    "Server",
    "Client",
    "Context",
    "ToolError",
    "McpError",
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
    "Server": ("mcpkit.server.server", "Server"),
    "Client": ("mcpkit.client", "Client"),
    "Context": ("mcpkit.server.context", "Context"),
    "ClientCapabilityError": ("mcpkit.server.context", "ClientCapabilityError"),
    "ToolError": ("mcpkit.protocol.errors", "ToolError"),
    "McpError": ("mcpkit.protocol.errors", "McpError"),
    "ToolResult": ("mcpkit.server.content", "ToolResult"),
    "Content": ("mcpkit.server.content", "Content"),
    "text": ("mcpkit.server.content", "text"),
    "image": ("mcpkit.server.content", "image"),
    "audio": ("mcpkit.server.content", "audio"),
    "resource": ("mcpkit.server.content", "resource"),
    "resource_link": ("mcpkit.server.content", "resource_link"),
    "user": ("mcpkit.server.content", "user"),
    "assistant": ("mcpkit.server.content", "assistant"),
}

if TYPE_CHECKING:
    from .client import Client
    from .protocol.errors import McpError, ToolError
    from .server.content import Content, ToolResult, assistant, audio, image, resource, resource_link, text, user
    from .server.context import ClientCapabilityError, Context
    from .server.server import Server


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'mcpkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
