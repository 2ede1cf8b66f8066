"""JWT access tokens end to end over Streamable HTTP: keys made here, the JWKS served by a local
HTTP server, and every refusal seen as the client sees it (status and WWW-Authenticate)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import jwt
import pytest

from mcpkit.auth import JWTVerifier, ResourceServer
from tests.auth.conftest import AuthServer, Keys, b64url, public_jwk
from tests.auth.test_http_auth import as_user, make_server
from tests.test_http import jsonrpc

ISSUER = "https://id.example.com"
RESOURCE = "https://mcp.example.com/mcp"
META_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    out: dict[str, Any] = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "client_id": "desktop-app",
                           "scope": "mcp files:read", "iat": now, "exp": now + 300}
    out.update(changes)
    return {k: v for k, v in out.items() if v is not None}


def mint(key: Any, body: dict[str, Any], *, kid: str = "k1", alg: str = "RS256") -> str:
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid, "typ": "at+jwt"})


def unsigned(body: dict[str, Any]) -> str:
    header = b64url(json.dumps({"alg": "none", "typ": "JWT", "kid": "k1"}).encode())
    return f"{header}.{b64url(json.dumps(body).encode())}."


@pytest.fixture
def protected(clients, auth_server: AuthServer, keys: Keys) -> Any:
    auth_server.jwks = {"keys": [public_jwk(keys.rsa, "k1", "RS256")]}
    verifier = JWTVerifier(ISSUER, RESOURCE, jwks_uri=auth_server.jwks_uri, jwks_min_refresh=0.0)
    auth = ResourceServer(verifier, resource=RESOURCE, authorization_servers=[ISSUER],
                          scopes_supported=["mcp", "files:read", "files:write"], required_scopes=["mcp"])
    return clients.app(make_server(), auth=auth)


def challenge(reply: Any) -> dict[str, str]:
    value = reply.headers["www-authenticate"]
    assert value.startswith("Bearer "), value
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


@pytest.mark.req("AU-05")
@pytest.mark.asyncio
async def test_a_valid_jwt_passes_and_names_the_caller(clients, protected, keys):
    client = as_user(clients.asgi(protected), mint(keys.rsa, claims()))
    await client.initialize()
    result = await client.result("tools/call", {"name": "whoami", "arguments": {}})
    assert result["structuredContent"] == {"principal": "alice", "client": "desktop-app",
                                           "scopes": ["files:read", "mcp"]}


@pytest.mark.req("AU-05", "AU-06", "AU-07", "SEC-01")
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("make", "description"),
    [
        (lambda k: mint(k.rsa, claims(exp=int(time.time()) - 3600)), "token expired"),
        (lambda k: mint(k.rsa, claims(aud="https://other.example.com/mcp")), "wrong audience"),
        (lambda k: mint(k.rsa, claims(iss="https://evil.example.com")), "wrong issuer"),
        (lambda k: mint(k.rsa_other, claims()), "bad signature"),  # another key, same kid
        (lambda k: unsigned(claims()), "algorithm not allowed"),  # alg: none
        (lambda k: mint(k.rsa, claims(), kid="k-unknown"), "unknown key id"),
    ],
    ids=["expired", "wrong-audience", "wrong-issuer", "bad-signature", "alg-none", "unknown-kid"],
)
async def test_each_bad_jwt_gets_401_with_the_reason(clients, protected, keys, make, description):
    client = clients.asgi(protected)
    reply = await client.post(jsonrpc("initialize", {}, 1), authorization=f"Bearer {make(keys)}")
    assert reply.status == 401
    assert challenge(reply) == {"error": "invalid_token", "error_description": description, "scope": "mcp",
                                "resource_metadata": META_URL}


@pytest.mark.req("AU-09")
@pytest.mark.asyncio
async def test_a_jwt_without_the_item_scope_gets_403(clients, protected, keys):
    client = as_user(clients.asgi(protected), mint(keys.rsa, claims()))
    await client.initialize()
    reply = await client.post(jsonrpc("tools/call", {"name": "save", "arguments": {"name": "x"}}, 5))
    assert reply.status == 403
    assert challenge(reply) == {"error": "insufficient_scope", "error_description": "needs scope files:write",
                                "scope": "mcp files:write", "resource_metadata": META_URL}


@pytest.mark.asyncio
async def test_the_identity_provider_rotates_its_keys_without_a_restart(clients, protected, auth_server, keys):
    first = as_user(clients.asgi(protected), mint(keys.rsa, claims()))
    await first.initialize()
    # the provider publishes a new key and signs with it; the old one is retired
    auth_server.jwks = {"keys": [public_jwk(keys.ec, "k2", "ES256")]}
    rotated = as_user(clients.asgi(protected), mint(keys.ec, claims(sub="bob"), kid="k2", alg="ES256"))
    await rotated.initialize()
    result = await rotated.result("tools/call", {"name": "whoami", "arguments": {}})
    assert result["structuredContent"]["principal"] == "bob"
    assert auth_server.jwks_requests == 2  # one fetch at first use, one for the new kid
