"""A small server on the official MCP Python SDK (PyPI ``mcp`` 2.x, ``MCPServer``), written the way
its documentation shows: two tools (one with structured output), a resource and a prompt.

    python sdk_server.py                   # stdio
    python sdk_server.py --http PORT       # Streamable HTTP on 127.0.0.1:PORT/mcp
"""

import sys

import uvicorn
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

mcp = MCPServer("peer-sdk", version="1.0.0", log_level="WARNING")


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.resource("peer://hello", mime_type="text/plain")
def hello() -> str:
    """A greeting."""
    return "Hello!"


@mcp.prompt()
def greet(who: str) -> str:
    """Greet someone."""
    return f"Say hello to {who}."


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        app = mcp.streamable_http_app()
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        mcp.run("stdio")
