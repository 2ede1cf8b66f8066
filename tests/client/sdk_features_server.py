"""A server on the official SDK (mcp 2.x) that uses what the client must answer: sampling,
elicitation, roots and progress. The client's tests drive it over stdio."""

from __future__ import annotations

import sys

from mcp import types
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel

mcp = MCPServer("sdk-features", log_level="WARNING")


class Name(BaseModel):
    name: str


@mcp.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Asks the client's model (sampling/createMessage)."""
    result = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))], max_tokens=50)
    return f"model said: {result.content.text}"


@mcp.tool()
async def ask_user(ctx: Context) -> str:
    """Asks the user for a name (elicitation/create)."""
    answer = await ctx.elicit("Your name?", Name)
    return f"user said: {answer.data.name}" if answer.action == "accept" else f"user: {answer.action}"


@mcp.tool()
async def list_roots(ctx: Context) -> str:
    """Lists the client's roots (roots/list)."""
    result = await ctx.session.list_roots()
    return ", ".join(str(root.uri) for root in result.roots)


@mcp.tool()
async def count(steps: int, ctx: Context) -> str:
    """Reports progress once per step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps)
    return f"counted {steps}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--port":  # Streamable HTTP, stateful, SSE answers
        import uvicorn

        uvicorn.run(mcp.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        mcp.run("stdio")
