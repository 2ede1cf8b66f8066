"""Server Cards (SEP-2127): the card at <mcp path>/server-card and the MCP Catalog at
/.well-known/mcp/catalog.json, built from the Server's own fields, public and cacheable."""

from __future__ import annotations

import pytest

from mcpkit import Server
from mcpkit.protocol.revisions import SUPPORTED_VERSIONS
from mcpkit.transports.discovery import CARD_MEDIA_TYPE, CARD_SCHEMA, build_card, card_name, validate_card
from tests.test_http import AsgiDriver


def server() -> Server:
    return Server("weather", "1.2.0", title="Weather", description="Forecasts for any city.")


async def get(app, path: str, **headers: str):
    driver = AsgiDriver(app)
    reply = await driver.open("GET", path, {"host": "127.0.0.1:8000", **headers}, b"")
    return reply.status, reply.headers, await reply.read()


@pytest.mark.asyncio
async def test_the_card_is_built_from_the_server_and_valid():
    import orjson

    status, headers, body = await get(server().http_app(), "/mcp/server-card")
    assert status == 200 and headers["content-type"] == CARD_MEDIA_TYPE
    card = orjson.loads(body)
    assert card == {
        "$schema": CARD_SCHEMA, "name": "localhost/weather", "version": "1.2.0", "title": "Weather",
        "description": "Forecasts for any city.",
        "remotes": [
            {"type": "streamable-http", "url": "http://127.0.0.1:8000/mcp", "supportedProtocolVersions": list(SUPPORTED_VERSIONS)},
            {"type": "sse", "url": "http://127.0.0.1:8000/sse", "supportedProtocolVersions": ["2024-11-05"]},
        ],
    }
    assert validate_card(card) == []
    assert headers["access-control-allow-origin"] == "*" and "max-age" in headers["cache-control"]


@pytest.mark.asyncio
async def test_the_catalog_points_at_the_card_and_a_foreign_origin_may_read_both():
    import orjson

    app = server().http_app(card_name="com.example/weather")
    status, headers, body = await get(app, "/.well-known/mcp/catalog.json", origin="https://elsewhere.example")
    assert status == 200 and headers["access-control-allow-origin"] == "*"
    assert orjson.loads(body) == {"specVersion": "draft", "entries": [{
        "identifier": "urn:air:example.com:weather", "displayName": "Weather",
        "type": CARD_MEDIA_TYPE, "url": "http://127.0.0.1:8000/mcp/server-card"}]}
    status, _, body = await get(app, "/mcp/server-card", origin="https://elsewhere.example")
    assert status == 200 and orjson.loads(body)["name"] == "com.example/weather"


@pytest.mark.asyncio
async def test_the_card_needs_no_token_but_keeps_the_host_guard_and_can_be_switched_off():
    status, _, _ = await get(server().http_app(), "/mcp/server-card", host="evil.example")
    assert status == 403
    status, _, _ = await get(server().http_app(server_card=False), "/mcp/server-card")
    assert status == 404


@pytest.mark.asyncio
async def test_an_authorized_server_says_a_bearer_token_is_required():
    import orjson

    from mcpkit.auth import ResourceServer, StaticTokens

    auth = ResourceServer(StaticTokens({"t0ken-for-the-test": {"subject": "alice", "scopes": []}}),
                          resource="http://127.0.0.1:8000/mcp", authorization_servers=["https://auth.example"])
    status, _, body = await get(server().http_app(auth=auth), "/mcp/server-card")
    assert status == 200
    [remote, _] = orjson.loads(body)["remotes"]
    assert remote["headers"] == [{"name": "Authorization", "description": "Bearer token (OAuth 2.1 access token)",
                                  "isRequired": True, "isSecret": True}]


def test_names_and_validation():
    assert card_name("weather", "mcp.example.com") == "com.example.mcp/weather"
    assert card_name("my server!", "localhost:8000") == "localhost/my-server"
    assert card_name("w", "[::1]:8000") == "localhost/w" and card_name("w", "10.0.0.7") == "10.0.0.7/w"
    good = build_card(server(), "https://mcp.example.com", "/mcp")
    assert validate_card(good) == []
    assert validate_card({**good, "name": "no-slash"})[0].startswith("name")
    assert validate_card({**good, "version": "^1.2"})[0].startswith("version")
    assert validate_card({**good, "description": "x" * 101})[0].startswith("description")
    assert validate_card({**good, "packages": []})[0].startswith("unknown member")
    assert validate_card({**good, "remotes": [{"type": "ws", "url": "ftp://x"}]}) == [
        "remotes[0].type must be 'streamable-http' or 'sse'",
        "remotes[0].url must be an http(s) URL or start with a {variable}"]


def test_mcpkit_check_validates_a_published_card():
    import subprocess
    import sys

    from tests.test_http import start_server, stop_server

    proc, port = start_server()
    try:
        done = subprocess.run([sys.executable, "-m", "mcpkit", "check", f"http://127.0.0.1:{port}/mcp", "--rule",
                               "discovery.server-card", "--format", "json"], capture_output=True, text=True, timeout=120)
    finally:
        stop_server(proc)
    assert done.returncode == 0, done.stdout + done.stderr
    import json

    report = json.loads(done.stdout)
    findings = [f for f in report["findings"] if f["rule"] == "discovery.server-card"]
    assert findings and all(f["status"] == "pass" for f in findings), findings


@pytest.mark.asyncio
async def test_a_host_let_in_by_a_wildcard_alone_is_never_written_into_a_cacheable_document():
    """Under ``--allow-host '*'`` the Host is whatever a client sent: a card or catalog naming it
    must not be kept by a shared cache and handed to everyone else."""
    import orjson

    app = server().http_app(allowed_hosts=["*", "mcp.example.com"])
    for path in ("/mcp/server-card", "/.well-known/mcp/catalog.json"):
        status, headers, body = await get(app, path, host="evil.example")
        assert status == 200 and headers["cache-control"] == "no-store", (path, headers)
        assert "public" not in headers["cache-control"]
        if path.endswith("server-card"):
            assert validate_card(orjson.loads(body)) == []  # still a valid card, for this client
        # a Host the server names (listed, or loopback) is cacheable as before
        for named in ("mcp.example.com", "127.0.0.1:8000"):
            status, headers, _ = await get(app, path, host=named)
            assert status == 200 and headers["cache-control"] == "public, max-age=3600", (path, named)


@pytest.mark.asyncio
async def test_the_protected_resource_metadata_reflecting_a_wildcard_host_is_not_cacheable():
    from mcpkit.auth.resource import ResourceServer
    from mcpkit.auth.tokens import InvalidToken

    class NoTokens:
        async def verify(self, token: str):
            raise InvalidToken("no tokens here")

    def app(resource: str | None):
        auth = ResourceServer(NoTokens(), resource=resource, authorization_servers=["https://id.example.com"])
        return server().http_app(allowed_hosts=["*"], auth=auth)

    status, headers, body = await get(app(None), "/.well-known/oauth-protected-resource/mcp", host="evil.example")
    assert status == 200 and b"evil.example" in body and headers["cache-control"] == "no-store"
    status, headers, _ = await get(app(None), "/.well-known/oauth-protected-resource/mcp")
    assert status == 200 and headers["cache-control"] == "max-age=3600"  # loopback: named
    configured = app("https://mcp.example.com/mcp")
    status, headers, body = await get(configured, "/.well-known/oauth-protected-resource/mcp", host="evil.example")
    assert status == 200 and b"evil.example" not in body and headers["cache-control"] == "max-age=3600"
