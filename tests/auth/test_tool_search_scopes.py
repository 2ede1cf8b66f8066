"""Tool search over authenticated HTTP: a tool declared with ``scopes=`` the caller's token lacks
is never found by ``search_tools``, and ``call_tool`` naming it gets the 403 a direct call gets
(the HTTP layer reads the call tool's request as the named tool's, server/toolsearch.py)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Server
from mcpkit.auth.tokens import AccessToken
from tests.auth.test_http_auth import Tokens, as_user, auth_for, challenge_params
from tests.test_http import jsonrpc

USER = AccessToken("mallory", client_id="cli", scopes=frozenset({"mcp"}))
ADMIN = AccessToken("root", client_id="cli", scopes=frozenset({"mcp", "admin"}))


def make_server() -> tuple[Server, list[str]]:
    server = Server("scoped", tool_search=True)
    ran: list[str] = []

    @server.tool(destructive=False, open_world=False, scopes=["admin"])
    def reset_database(target: str) -> str:
        """Reset the database to its empty state."""
        ran.append(target)
        return f"reset {target}"

    @server.tool(read_only=True, open_world=False)
    def database_status() -> str:
        """Read the status of the database."""
        return "fine"

    return server, ran


async def _found(client: Any, query: str) -> list[str]:
    result = await client.result("tools/call", {"name": "search_tools", "arguments": {"query": query}})
    return [t["name"] for t in result["structuredContent"]["tools"]]


@pytest.mark.req("AU-09")
@pytest.mark.asyncio
async def test_a_scoped_tool_is_neither_found_nor_callable_through_the_pair_without_its_scope(clients):
    server, ran = make_server()
    app = clients.app(server, auth=auth_for(Tokens(user=USER, admin=ADMIN)))
    user = as_user(clients.asgi(app), "user")
    await user.initialize()
    assert await _found(user, "reset the database") == ["database_status"]
    call = {"name": "reset_database", "arguments": {"target": "db"}}
    direct = await user.post(jsonrpc("tools/call", call, 5))
    through = await user.post(jsonrpc("tools/call", {"name": "call_tool", "arguments": call}, 6))
    assert direct.status == through.status == 403
    assert challenge_params(through.headers["www-authenticate"]) == challenge_params(direct.headers["www-authenticate"])
    assert "admin" in challenge_params(through.headers["www-authenticate"])["scope"].split()
    assert ran == []
    # the token with the scope finds it and calls it through the pair
    admin = as_user(clients.asgi(app), "admin")
    await admin.initialize()
    assert (await _found(admin, "reset the database"))[0] == "reset_database"
    result = await admin.result("tools/call", {"name": "call_tool", "arguments": call})
    assert result["content"] == [{"type": "text", "text": "reset db"}] and ran == ["db"]
