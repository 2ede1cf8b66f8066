"""A 2026-07-28 ``subscriptions/listen`` stream's ``resourceSubscriptions`` are subscriptions:
each URI takes the path ``resources/subscribe`` takes (existence, scopes, gates, the policy's
read guards, audit), so a caller cannot watch, by listening, what it may not subscribe to."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.auth.test_scopes_everywhere import ADMIN, USER, _Auth, _as, _Modern, make_server
from tests.harness import RpcError, connect

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _listen(uris: list[str]) -> dict[str, Any]:
    return {"notifications": {"resourceSubscriptions": uris}, "_meta": META}


def _updates(c: Any, rid: Any) -> list[str]:
    return [n["params"]["uri"] for n in c.notifications if n["method"] == "notifications/resources/updated"
            and n["params"]["_meta"].get("io.modelcontextprotocol/subscriptionId") == rid]


@pytest.mark.req("AU-09", "SB-01")
@pytest.mark.asyncio
async def test_a_listen_stream_cannot_watch_a_resource_beyond_the_tokens_scopes(wire):
    from mcpkit.server.scopes import ScopeStep

    server, _ = make_server()
    server._install_step("scopes", ScopeStep(_Auth()))
    async with connect(server, _Modern(wire), None) as c:
        await _as(c, USER)
        rid, fut = c.send_request("subscriptions/listen", _listen(["secret://index"]))
        await asyncio.sleep(0.05)
        server.notify_resource_updated("secret://index")
        await asyncio.sleep(0.05)
        assert _updates(c, rid) == []  # nothing of the scoped resource reaches the listener
        assert fut.done(), "the listen request should be refused, not left open watching"
        with pytest.raises(RpcError) as refused:
            fut.result()
        assert refused.value.code == -32602 and "Insufficient scope" in refused.value.message
        assert not server._listeners
        # with the scope, the same listen is honoured
        await _as(c, ADMIN)
        rid, fut = c.send_request("subscriptions/listen", _listen(["secret://index"]))
        await asyncio.sleep(0.05)
        server.notify_resource_updated("secret://index")
        await asyncio.sleep(0.05)
        assert _updates(c, rid) == ["secret://index"]
        c.cancel(rid)


@pytest.mark.req("AU-09")
@pytest.mark.asyncio
async def test_over_http_a_listen_naming_a_scoped_resource_is_refused_with_403():
    from tests.auth.test_http_auth import Tokens, auth_for
    from tests.reliability.test_hostile_transport import call

    server, _ = make_server()
    app = server.http_app(auth=auth_for(Tokens(user=USER, admin=ADMIN)), json_response=True)
    body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": _listen(["secret://x"])}
    headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
               ("authorization", "Bearer user"), ("mcp-protocol-version", "2026-07-28"),
               ("mcp-method", "subscriptions/listen")]
    try:
        answer = await call(app, body=body, headers=headers)
        assert answer.status == 403  # as resources/subscribe of it: the challenge names the scope
        challenge = dict(answer.headers)["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and "admin" in challenge, challenge
        assert not server._listeners
    finally:
        app.close_all()


@pytest.mark.req("RS-06", "SB-01")
@pytest.mark.asyncio
async def test_a_listen_stream_is_held_to_the_sandbox_and_to_what_exists(wire, tmp_path):
    from mcpkit import Server
    from mcpkit.policy import Policy
    from mcpkit.policy.sandbox import Sandbox

    root = tmp_path / "root"
    root.mkdir()
    server = Server("files", policy=Policy(sandbox=Sandbox([root])))

    @server.resource_template("file:///{+path}")
    def any_file(path: str) -> str:
        return "content"

    async with connect(server, _Modern(wire), None) as c:
        for uri in ("file:///etc/passwd", "nothing://registered"):
            rid, fut = c.send_request("subscriptions/listen", _listen([f"file://{root}/ok.txt", uri]))
            with pytest.raises(RpcError) as refused:
                await asyncio.wait_for(fut, 5)
            assert refused.value.code == -32602, uri
            assert not server._listeners and not _updates(c, rid)
        assert not [n for n in c.notifications if n["method"] == "notifications/subscriptions/acknowledged"]
        rid, fut = c.send_request("subscriptions/listen", _listen([f"file://{root}/ok.txt"]))
        await asyncio.sleep(0.05)
        server.notify_resource_updated(f"file://{root}/ok.txt")
        await asyncio.sleep(0.05)
        assert _updates(c, rid) == [f"file://{root}/ok.txt"]
        c.cancel(rid)


@pytest.mark.asyncio
async def test_an_async_middleware_sees_and_may_refuse_each_watched_uri(wire):
    from mcpkit import Middleware, Server
    from mcpkit.protocol.errors import McpError

    seen: list[str] = []

    class NoPayroll(Middleware):
        async def on_subscribe(self, ctx: Any, call_next: Any) -> Any:
            seen.append(ctx.name)
            if "payroll" in ctx.name:
                raise McpError(-32602, "not yours")
            return await call_next(ctx)

    server = Server("hr")
    server.add_middleware(NoPayroll())

    @server.resource_template("hr://{name}")
    def record(name: str) -> str:
        return name

    async with connect(server, _Modern(wire), None) as c:
        rid, fut = c.send_request("subscriptions/listen", _listen(["hr://payroll", "hr://alice"]))
        with pytest.raises(RpcError):
            await asyncio.wait_for(fut, 5)
        assert not server._listeners
        rid, fut = c.send_request("subscriptions/listen", _listen(["hr://alice"]))
        await asyncio.sleep(0.05)
        server.notify_resource_updated("hr://payroll")
        server.notify_resource_updated("hr://alice")
        await asyncio.sleep(0.05)
        assert _updates(c, rid) == ["hr://alice"] and "hr://alice" in seen
        c.cancel(rid)
