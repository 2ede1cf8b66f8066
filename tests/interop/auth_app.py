"""A protected server for the authorization interop tests: `mcpkit serve` loads it with --auth."""

from __future__ import annotations

from typing import Any

from mcpkit import Context, Server

server = Server("protected-notes", "1.0.0")


@server.tool(read_only=True, open_world=False)
def whoami(ctx: Context) -> dict[str, Any]:
    """Who the server thinks is calling."""
    token = ctx.access_token
    return {"principal": ctx.principal, "scopes": sorted(token.scopes) if token is not None else []}


@server.tool(destructive=False, open_world=False, scopes=["notes:write"])
def add_note(text: str) -> str:
    """Keep a note (needs the notes:write scope)."""
    return f"noted: {text}"
