"""The resource server over Streamable HTTP: metadata, 401 and 403 challenges, scopes per item,
sessions bound to their user, and the principal reaching tools, rate limits and audit lines."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.auth.resource import ResourceServer, canonical_uri
from mcpkit.auth.tokens import AccessToken, InvalidToken
from mcpkit.policy import Gates, Policy
from tests.test_http import jsonrpc

ASGI_ORIGIN = "http://127.0.0.1:8000"  # the in-process driver's Host
META_URL = f"{ASGI_ORIGIN}/.well-known/oauth-protected-resource/mcp"


class Tokens:
    """A verifier from a dict: token -> AccessToken."""

    def __init__(self, **tokens: AccessToken) -> None:
        self.tokens = tokens
        self.seen: list[str] = []

    async def verify(self, token: str) -> AccessToken:
        self.seen.append(token)
        if token == "expired-token":
            raise InvalidToken("token expired")
        found = self.tokens.get(token)
        if found is None:
            raise InvalidToken("unknown token")
        return found


ALICE = AccessToken("alice", client_id="cli", scopes=frozenset({"mcp", "files:read"}))
ALICE_WRITER = AccessToken("alice", client_id="cli", scopes=frozenset({"mcp", "files:write"}))
BOB = AccessToken("bob", scopes=frozenset({"mcp"}))


class MemoryAudit:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def record(self, entry: dict[str, Any]) -> None:
        self.lines.append(entry)


def make_server(policy: Any = None) -> Server:
    server = Server("protected", policy=policy)

    @server.tool(read_only=True, open_world=False)
    def whoami(ctx: Context) -> dict[str, Any]:
        token = ctx.access_token
        return {"principal": ctx.principal, "client": token.client_id, "scopes": sorted(token.scopes)}

    @server.tool(destructive=False, open_world=False, scopes=["files:write"])
    def save(name: str) -> str:
        return f"saved {name}"

    @server.resource("notes://secret", scopes=["files:read"])
    def secret() -> str:
        return "the plan"

    @server.prompt(scopes=["prompts"])
    def brief() -> str:
        return "Be brief."

    return server


def auth_for(verifier: Any, **options: Any) -> ResourceServer:
    options.setdefault("authorization_servers", ["https://id.example.com"])
    options.setdefault("scopes_supported", ["mcp", "files:read", "files:write", "offline_access"])
    options.setdefault("required_scopes", ["mcp"])
    return ResourceServer(verifier, **options)


def challenge_params(value: str) -> dict[str, str]:
    assert value.startswith("Bearer "), value
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


def bearer(token: str) -> str:
    return f"Bearer {token}"


def as_user(client: Any, token: str) -> Any:
    """``client`` sending ``Authorization: Bearer <token>`` on every request unless told otherwise."""
    base = client.headers

    def headers(**extra: str | None) -> dict[str, str]:
        extra.setdefault("authorization", bearer(token))
        return base(**extra)

    client.headers = headers
    return client


# ------------------------------------------------------------------------------------------ metadata


@pytest.mark.req("AU-02", "AU-03", "AU-12")
@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])
async def test_protected_resource_metadata_is_public_at_both_well_known_paths(clients, path):
    app = clients.app(make_server(), auth=auth_for(Tokens(), resource="HTTPS://MCP.Example.com/mcp/"))
    client = clients.asgi(app)
    reply = await client.driver.open("GET", path, {})
    assert reply.status == 200
    assert json.loads(await reply.read()) == {
        "resource": "https://mcp.example.com/mcp",  # AU-15: canonical form
        "bearer_methods_supported": ["header"],
        "authorization_servers": ["https://id.example.com"],
        "scopes_supported": ["mcp", "files:read", "files:write"],  # never offline_access
    }


# ------------------------------------------------------------------------------------------ 401


@pytest.mark.req("AU-03", "AU-04", "AU-06", "AU-08")
@pytest.mark.asyncio
async def test_a_request_without_a_token_gets_401_naming_the_metadata_and_scopes(clients):
    client = clients.asgi(clients.app(make_server(), auth=auth_for(Tokens())))
    reply = await client.post(jsonrpc("initialize", {}, 1))
    assert reply.status == 401
    assert challenge_params(reply.headers["www-authenticate"]) == {"scope": "mcp", "resource_metadata": META_URL}
    body = json.loads(await reply.read())
    assert body["error"]["code"] == -32600 and "bearer token" in body["error"]["message"]


@pytest.mark.req("AU-05", "AU-06", "AU-13", "SEC-01")
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("authorization", "query", "error", "description"),
    [
        ("Bearer expired-token", "", "invalid_token", "token expired"),
        ("Bearer someone-elses-token", "", "invalid_token", "unknown token"),
        ("Basic YWxpY2U6cHc=", "", "invalid_request", "expected the Bearer scheme"),
        (None, "?access_token=alice", None, None),  # AU-13: never from the query string
    ],
)
async def test_bad_credentials_get_401_with_the_reason(clients, authorization, query, error, description):
    verifier = Tokens(alice=ALICE)
    client = clients.asgi(clients.app(make_server(), auth=auth_for(verifier)))
    client.path = "/mcp" + query
    reply = await client.post(jsonrpc("initialize", {}, 1), authorization=authorization)
    assert reply.status == 401
    params = challenge_params(reply.headers["www-authenticate"])
    assert params.get("error") == error and params.get("error_description") == description
    assert params["resource_metadata"] == META_URL
    assert "alice" not in verifier.seen


# ------------------------------------------------------------------------------------------ valid tokens


@pytest.mark.req("AU-05", "SEC-03")
@pytest.mark.asyncio
async def test_a_valid_token_reaches_the_tool_and_every_request_is_verified(clients):
    verifier = Tokens(alice=ALICE)
    client = as_user(clients.asgi(clients.app(make_server(), auth=auth_for(verifier))), "alice")
    await client.initialize()
    result = await client.result("tools/call", {"name": "whoami", "arguments": {}})
    assert result["structuredContent"] == {"principal": "alice", "client": "cli", "scopes": ["files:read", "mcp"]}
    # the session is no credential: the same session without the token is refused (SEC-03, AU-13)
    reply = await client.post(jsonrpc("tools/list", {}, 9), authorization=None)
    assert reply.status == 401
    assert len(verifier.seen) == 3  # initialize, notifications/initialized, tools/call


@pytest.mark.req("SEC-03")
@pytest.mark.asyncio
async def test_a_session_belongs_to_the_user_who_opened_it(clients):
    app = clients.app(make_server(), auth=auth_for(Tokens(alice=ALICE, bob=BOB)))
    alice = as_user(clients.asgi(app), "alice")
    await alice.initialize()
    reply = await alice.post(jsonrpc("tools/list", {}, 5), authorization=bearer("bob"))
    assert reply.status == 404  # bob cannot use (or learn about) alice's session
    assert (await alice.result("tools/list", {}))["tools"]


# ------------------------------------------------------------------------------------------ 403


@pytest.mark.req("AU-08", "AU-09", "AU-10")
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("method", "params", "needed"),
    [
        ("tools/call", {"name": "save", "arguments": {"name": "x"}}, "mcp files:write"),
        ("prompts/get", {"name": "brief"}, "mcp prompts"),
    ],
)
async def test_an_item_needing_more_scope_gets_403_insufficient_scope(clients, method, params, needed):
    client = as_user(clients.asgi(clients.app(make_server(), auth=auth_for(Tokens(alice=ALICE)))), "alice")
    await client.initialize()
    reply = await client.post(jsonrpc(method, params, 7))
    assert reply.status == 403
    params_ = challenge_params(reply.headers["www-authenticate"])
    assert params_["error"] == "insufficient_scope"
    assert params_["scope"] == needed  # all the scopes the operation needs, in one challenge
    assert params_["resource_metadata"] == META_URL


@pytest.mark.req("AU-09", "AU-11")
@pytest.mark.asyncio
async def test_stepping_up_and_broader_scopes_grant_access(clients):
    tokens = Tokens(alice=ALICE, writer=ALICE_WRITER)
    auth = auth_for(tokens, scope_implies={"files:write": ["files:read"]})
    client = as_user(clients.asgi(clients.app(make_server(), auth=auth)), "alice")
    await client.initialize()
    assert (await client.post(jsonrpc("tools/call", {"name": "save", "arguments": {"name": "x"}}, 3))).status == 403
    # the same user with a stepped-up token continues in the same session
    saved = await client.result("tools/call", {"name": "save", "arguments": {"name": "x"}},
                                authorization=bearer("writer"))
    assert saved["content"] == [{"type": "text", "text": "saved x"}]
    # files:write implies files:read (AU-11): the secret resource is readable with it
    read = await client.result("resources/read", {"uri": "notes://secret"}, authorization=bearer("writer"))
    assert read["contents"][0]["text"] == "the plan"


@pytest.mark.req("AU-08")
@pytest.mark.asyncio
async def test_the_server_wide_scope_is_required_for_anything(clients):
    outsider = AccessToken("eve", scopes=frozenset({"files:read"}))
    client = clients.asgi(clients.app(make_server(), auth=auth_for(Tokens(eve=outsider))))
    reply = await client.post(jsonrpc("initialize", {}, 1), authorization=bearer("eve"))
    assert reply.status == 403
    assert challenge_params(reply.headers["www-authenticate"])["scope"] == "mcp"


# ------------------------------------------------------------------------------------------ every mode


@pytest.mark.asyncio
async def test_stateless_and_2026_07_28_requests_are_checked_the_same_way(clients, wire):
    app = clients.app(make_server(), auth=auth_for(Tokens(alice=ALICE)), stateless=True)
    client = clients.asgi(app)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    call = {"name": "save", "arguments": {"name": "x"}, "_meta": meta}
    headers = {"mcp-method": "tools/call", "mcp-name": "save", "mcp-protocol-version": "2026-07-28"}
    no_token = await client.driver.open("POST", "/mcp", {**client.headers(), **headers},
                                        json.dumps(jsonrpc("tools/call", call, 1)).encode())
    assert no_token.status == 401
    with_token = {**client.headers(), **headers, "authorization": bearer("alice")}
    lacking = await client.driver.open("POST", "/mcp", with_token, json.dumps(jsonrpc("tools/call", call, 2)).encode())
    assert lacking.status == 403
    whoami = {"name": "whoami", "arguments": {}, "_meta": meta}
    ok = await client.driver.open(
        "POST", "/mcp", {**client.headers(), **headers, "mcp-name": "whoami", "authorization": bearer("alice")},
        json.dumps(jsonrpc("tools/call", whoami, 3)).encode())
    assert ok.status == 200, await ok.read()
    answer = json.loads(await ok.read())
    wire.record(answer, "2026-07-28", "tools/call")
    assert answer["result"]["structuredContent"]["principal"] == "alice"


@pytest.mark.asyncio
async def test_legacy_sse_needs_the_token_too(clients):
    client = clients.asgi(clients.app(make_server(), auth=auth_for(Tokens(alice=ALICE))))
    refused = await client.driver.open("GET", "/sse", {"accept": "text/event-stream"})
    assert refused.status == 401
    assert challenge_params(refused.headers["www-authenticate"])["resource_metadata"] == META_URL


# ------------------------------------------------------------------------------------------ policy


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_the_principal_keys_rate_limits_and_audit_lines(clients):
    from mcpkit.policy import RateLimiter

    audit = MemoryAudit()
    policy = Policy(gates=Gates(), audit=audit, rate_limiter=RateLimiter("2/min"))
    app = clients.app(make_server(policy), auth=auth_for(Tokens(alice=ALICE, bob=BOB)))
    alice, bob = as_user(clients.asgi(app), "alice"), as_user(clients.asgi(app), "bob")
    await alice.initialize()
    await bob.initialize()
    outcomes = []
    for client, who in ((alice, "alice"), (alice, "alice"), (alice, "alice"), (bob, "bob")):
        result = await client.result("tools/call", {"name": "whoami", "arguments": {}})
        outcomes.append((who, bool(result.get("isError"))))
    assert outcomes == [("alice", False), ("alice", False), ("alice", True), ("bob", False)]
    assert [line["principal"] for line in audit.lines] == ["alice", "alice", "alice", "bob"]


def test_canonical_uris():
    assert canonical_uri("HTTPS://Example.COM/mcp/") == "https://example.com/mcp"
    assert canonical_uri("https://example.com") == "https://example.com"
    with pytest.raises(ValueError, match="fragment"):
        canonical_uri("https://example.com/mcp#x")
    with pytest.raises(ValueError, match="absolute"):
        canonical_uri("/mcp")
