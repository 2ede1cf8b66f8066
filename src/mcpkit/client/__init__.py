"""The mcpkit client: one connection to any MCP server (stdio, Streamable HTTP, legacy SSE, or an
mcpkit Server in memory), in both protocol eras, with tool proxies.

    from mcpkit.client import Client

    async with Client(["python", "server.py"]) as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})

httpx is imported only by the HTTP transports (the ``client`` extra).
"""

from .client import Client
from .errors import (ClientError, ClientTimeout, HttpRpcError, MessageTooLarge, MismatchedId, RpcError,
                     ToolCallError, UnsupportedVersion)
from .listening import Backoff, StreamState
from .proxies import ToolProxies, ToolProxy
from .skills import SkillVerificationError

__all__ = [
    "Client", "RpcError", "ClientError", "ClientTimeout", "HttpRpcError", "ToolCallError", "ToolProxies", "ToolProxy",
    "UnsupportedVersion", "Backoff", "StreamState", "MessageTooLarge", "MismatchedId",
    "SkillVerificationError",
]
