"""IntrospectionVerifier against a local RFC 7662 endpoint: answers, audience, caching, failures."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import pytest

from mcpkit.auth import AccessToken, IntrospectionVerifier, InvalidToken
from mcpkit.auth.introspection import NEGATIVE_CACHE_TTL
from tests.auth.conftest import AuthServer, Clock

AUDIENCE = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com/"
TOKEN = "opaque-token-0123456789"


def answer(clock: Clock, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"active": True, "sub": "alice", "client_id": "app-1", "scope": "files:read files:write",
                            "exp": int(clock.now) + 600, "aud": AUDIENCE, "iss": ISSUER, "token_type": "Bearer"}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def verifier(server: AuthServer, clock: Clock, **options: Any) -> IntrospectionVerifier:
    options.setdefault("audience", AUDIENCE)
    return IntrospectionVerifier(server.introspection_endpoint, client_id=server.client[0],
                                 client_secret=server.client[1], clock=clock, **options)


async def refused(v: IntrospectionVerifier, token: str = TOKEN) -> str:
    with pytest.raises(InvalidToken) as info:
        await v.verify(token)
    return info.value.description


@pytest.mark.req("AU-05")
@pytest.mark.asyncio
async def test_an_active_token(auth_server: AuthServer, clock: Clock) -> None:
    auth_server.answers[TOKEN] = answer(clock)
    token = await verifier(auth_server, clock, issuer=ISSUER).verify(TOKEN)
    assert token == AccessToken(subject="alice", client_id="app-1", scopes=frozenset({"files:read", "files:write"}),
                                expires_at=clock.now + 600, audience=(AUDIENCE,), issuer=ISSUER)
    assert token.claims["token_type"] == "Bearer"
    [request] = auth_server.introspect_requests
    assert request["form"] == {"token": TOKEN, "token_type_hint": "access_token"}
    assert request["content_type"] == "application/x-www-form-urlencoded"
    assert request["authorization"].startswith("Basic ")


@pytest.mark.asyncio
async def test_username_or_client_id_stand_in_for_sub(auth_server: AuthServer, clock: Clock) -> None:
    auth_server.answers = {"t1-0123456789": answer(clock, sub=None, username="bob"),
                           "t2-0123456789": answer(clock, sub=None, aud=None)}
    v = verifier(auth_server, clock)
    assert (await v.verify("t1-0123456789")).subject == "bob"
    robot = await v.verify("t2-0123456789")
    assert (robot.subject, robot.audience) == ("app-1", ())  # no aud: the AS vouches for the audience


@pytest.mark.req("AU-05", "AU-06")
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"active": False}, "token not active"),
        ({"active": "true"}, "token not active"),
        ({"exp": 1_750_000_000 - 1}, "token expired"),
        ({"exp": 1_750_000_000}, "token expired"),
        ({"nbf": 1_750_000_000 + 60}, "token not yet valid"),
        ({"iss": "https://evil.example.com/"}, "wrong issuer"),
        ({"token_type": "refresh_token"}, "not an access token"),
        ({"sub": None, "client_id": None}, "missing claim: sub"),
        ({"scope": 7}, "malformed claim: scope"),
        ({"exp": "later"}, "malformed claim: exp"),
    ],
)
async def test_refusals(auth_server: AuthServer, clock: Clock, changes: dict[str, Any], reason: str) -> None:
    auth_server.answers[TOKEN] = answer(clock, **changes)
    assert await refused(verifier(auth_server, clock, issuer=ISSUER)) == reason


@pytest.mark.req("AU-05", "AU-07", "SEC-01")
@pytest.mark.asyncio
@pytest.mark.parametrize("aud", ["https://other.example.com/mcp", ["https://a.example", "https://b.example"],
                                 AUDIENCE + "/"])
async def test_a_token_for_another_resource_is_refused(auth_server: AuthServer, clock: Clock, aud: Any) -> None:
    auth_server.answers[TOKEN] = answer(clock, aud=aud)
    assert await refused(verifier(auth_server, clock)) == "wrong audience"


@pytest.mark.asyncio
async def test_without_configured_audience_a_warning_is_logged(auth_server: AuthServer, clock: Clock,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mcpkit.auth"):
        v = verifier(auth_server, clock, audience=None)
    assert "no audience" in caplog.text
    auth_server.answers[TOKEN] = answer(clock, aud="https://whatever.example")
    assert (await v.verify(TOKEN)).subject == "alice"


@pytest.mark.asyncio
async def test_positive_answers_are_cached_by_hash(auth_server: AuthServer, clock: Clock) -> None:
    auth_server.answers[TOKEN] = answer(clock, exp=int(clock.now) + 30)
    v = verifier(auth_server, clock, cache_ttl=60)
    first = await v.verify(TOKEN)
    clock.now += 29
    assert await v.verify(TOKEN) is first
    assert len(auth_server.introspect_requests) == 1
    assert all(isinstance(k, bytes) and len(k) == 32 for k in v._positive)  # sha256 digests, not tokens
    clock.now += 1  # exp reached: the cache entry is gone and the AS is asked again
    assert await refused(v) == "token expired"
    assert len(auth_server.introspect_requests) == 2


@pytest.mark.asyncio
async def test_cache_ttl_and_size_bound(auth_server: AuthServer, clock: Clock) -> None:
    for i in range(3):
        auth_server.answers[f"token-{i}-0123456789"] = answer(clock, sub=f"u{i}")
    v = verifier(auth_server, clock, cache_ttl=10, max_cache=2)
    for i in range(3):
        await v.verify(f"token-{i}-0123456789")
    assert len(v._positive) == 2
    await v.verify("token-2-0123456789")  # still cached
    assert len(auth_server.introspect_requests) == 3
    await v.verify("token-0-0123456789")  # evicted: asked again
    assert len(auth_server.introspect_requests) == 4
    clock.now += 10
    await v.verify("token-0-0123456789")  # ttl over
    assert len(auth_server.introspect_requests) == 5


@pytest.mark.asyncio
async def test_negative_answers_are_cached_briefly(auth_server: AuthServer, clock: Clock) -> None:
    v = verifier(auth_server, clock)
    assert await refused(v) == "token not active"
    clock.now += NEGATIVE_CACHE_TTL - 0.1
    assert await refused(v) == "token not active"
    assert len(auth_server.introspect_requests) == 1
    auth_server.answers[TOKEN] = answer(clock)
    clock.now += 0.1
    assert (await v.verify(TOKEN)).subject == "alice"
    assert len(auth_server.introspect_requests) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("failure", ["status", "not json", "credentials"])
async def test_endpoint_failures_are_never_active_and_not_cached(auth_server: AuthServer, clock: Clock, failure: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    auth_server.answers[TOKEN] = answer(clock)
    v = verifier(auth_server, clock)
    if failure == "status":
        auth_server.introspect_status = 500
    elif failure == "not json":
        auth_server.introspect_body = b"<html>active: true</html>"
    else:
        auth_server.client = ("mcp-server", "rotated")  # the AS answers 401 to our old secret
    with caplog.at_level(logging.WARNING, logger="mcpkit.auth"):
        assert await refused(v) == "cannot reach the authorization server"
        assert await refused(v) == "cannot reach the authorization server"
    assert len(auth_server.introspect_requests) == 2
    assert "introspection" in caplog.text and TOKEN not in caplog.text


@pytest.mark.asyncio
async def test_an_unreachable_endpoint(clock: Clock) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    v = IntrospectionVerifier(f"http://127.0.0.1:{port}/introspect", audience=AUDIENCE, clock=clock, http_timeout=1)
    assert await refused(v) == "cannot reach the authorization server"


@pytest.mark.asyncio
async def test_concurrent_verifications_of_one_token_share_one_request(auth_server: AuthServer,
                                                                       clock: Clock) -> None:
    auth_server.answers[TOKEN] = answer(clock)
    v = verifier(auth_server, clock)
    results = await asyncio.gather(*(v.verify(TOKEN) for _ in range(10)))
    assert {r.subject for r in results} == {"alice"}
    assert len(auth_server.introspect_requests) == 1
    other = await asyncio.gather(*(v.verify("unknown-0123456789") for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, InvalidToken) and r.description == "token not active" for r in other)
    assert len(auth_server.introspect_requests) == 2


def test_construction_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="https"):
        IntrospectionVerifier("http://auth.example.com/introspect", audience=AUDIENCE)
    IntrospectionVerifier("https://auth.example.com/introspect", audience=AUDIENCE)
    with pytest.raises(ValueError, match="both"):
        IntrospectionVerifier("https://auth.example.com/introspect", client_id="x", audience=AUDIENCE)
    with pytest.raises(ValueError, match="audience"):
        IntrospectionVerifier("https://auth.example.com/introspect", audience=[])
