"""The HTTP app in an ASGI host: mounted under a prefix in Starlette, and called from browser
pages on another origin (CORS), on a real uvicorn server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from mcpkit import Client, Server
from mcpkit.auth import StaticTokens
from mcpkit.auth.resource import ResourceServer
from mcpkit.transports.serve import bind

PAGE = "https://app.example"
TOKEN = "a-long-enough-static-token-0123456789abcdef"


def _server() -> Server:
    server = Server("hosted", "1.0")

    @server.tool(read_only=True, open_world=False)
    def add(a: int, b: int) -> int:
        return a + b

    return server


class _Running:
    def __init__(self, app: object) -> None:
        sock = bind("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            self.thread.join(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def mounted() -> Iterator[int]:
    """A Starlette app with its own route and the MCP app mounted under /api, CORS for PAGE."""
    host = Starlette(routes=[
        Route("/health", lambda request: PlainTextResponse("ok")),
        Mount("/api", app=_server().http_app(cors_origins=[PAGE])),
    ])
    running = _Running(host)
    yield running.port
    running.stop()


@pytest.fixture(scope="module")
def guarded() -> Iterator[int]:
    """The MCP app behind bearer tokens, CORS for PAGE."""
    auth = ResourceServer(StaticTokens({TOKEN: {"subject": "alice", "scopes": []}}),
                          resource="http://127.0.0.1/mcp")
    running = _Running(_server().http_app(cors_origins=[PAGE], auth=auth))
    yield running.port
    running.stop()


def test_mounted_under_a_prefix_it_serves_streamable_http_there(mounted):
    async def go() -> None:
        async with Client(f"http://127.0.0.1:{mounted}/api/mcp") as client:
            assert await client.call_tool("add", {"a": 2, "b": 3}) == {
                "content": [{"type": "text", "text": '{"result":5}'}], "structuredContent": {"result": 5}}

    asyncio.run(go())
    assert httpx.get(f"http://127.0.0.1:{mounted}/health").text == "ok"  # the host's own routes still work
    assert httpx.post(f"http://127.0.0.1:{mounted}/mcp", json={}).status_code == 404  # not outside the prefix


def test_mounted_under_a_prefix_legacy_sse_names_the_prefixed_endpoint(mounted):
    async def go() -> None:
        async with Client(f"http://127.0.0.1:{mounted}/api/sse", transport="sse",
                          protocol_version="2024-11-05") as client:
            assert [t["name"] for t in await client.list_tools()] == ["add"]

    asyncio.run(go())
    with httpx.stream("GET", f"http://127.0.0.1:{mounted}/api/sse") as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                assert line.startswith("data: /api/messages/?session_id=")
                break


def _initialize(port: int, origin: str, path: str = "/api/mcp", **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}}}
    return httpx.post(f"http://127.0.0.1:{port}{path}", json=body, headers={
        "Origin": origin, "Accept": "application/json, text/event-stream", **headers})


def test_cors_preflight_is_answered_for_a_listed_origin_only(mounted):
    asked = "content-type, mcp-session-id, mcp-protocol-version, authorization"
    ok = httpx.options(f"http://127.0.0.1:{mounted}/api/mcp", headers={
        "Origin": PAGE, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": asked})
    assert ok.status_code == 204
    assert ok.headers["access-control-allow-origin"] == PAGE
    assert "POST" in ok.headers["access-control-allow-methods"]
    assert ok.headers["access-control-allow-headers"] == asked
    refused = httpx.options(f"http://127.0.0.1:{mounted}/api/mcp", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers


@pytest.mark.req("HS-02")
def test_cors_answers_expose_the_session_id_and_an_unlisted_origin_stays_refused(mounted):
    answer = _initialize(mounted, PAGE)
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == PAGE
    exposed = {h.strip().lower() for h in answer.headers["access-control-expose-headers"].split(",")}
    assert {"mcp-session-id", "www-authenticate", "mcp-protocol-version"} <= exposed
    assert answer.headers["mcp-session-id"]
    assert _initialize(mounted, "https://evil.example").status_code == 403  # DNS rebinding guard kept


def test_cors_with_authorization_preflight_needs_no_token_and_the_challenge_is_readable(guarded):
    preflight = httpx.options(f"http://127.0.0.1:{guarded}/mcp", headers={
        "Origin": PAGE, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 204
    challenged = _initialize(guarded, PAGE, path="/mcp")
    assert challenged.status_code == 401
    assert challenged.headers["www-authenticate"].startswith("Bearer")
    assert "www-authenticate" in challenged.headers["access-control-expose-headers"].lower()
    assert _initialize(guarded, PAGE, path="/mcp", Authorization=f"Bearer {TOKEN}").status_code == 200
