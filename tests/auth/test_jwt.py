"""JWTVerifier: signature, algorithm allow-list, issuer, audience, times, claims, JWKS fetching."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from mcpkit.auth import AccessToken, InvalidToken, JWTVerifier
from tests.auth.conftest import AuthServer, Clock, Keys, b64url, public_jwk

ISSUER = "https://auth.example.com/"
AUDIENCE = "https://mcp.example.com/mcp"


def payload(clock: Clock, **changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "client_id": "app-1",
        "iat": int(clock.now), "exp": int(clock.now) + 300, "scope": "files:read files:write",
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def mint(key: Any, claims: dict[str, Any], *, kid: str | None = "a", alg: str = "RS256") -> str:
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid, "typ": "at+jwt"} if kid is not None else {"typ": "at+jwt"})


def verifier(server: AuthServer, clock: Clock, **options: Any) -> JWTVerifier:
    return JWTVerifier(ISSUER, options.pop("audience", AUDIENCE), jwks_uri=server.jwks_uri, clock=clock, **options)


@pytest.fixture
def server(auth_server: AuthServer, keys: Keys) -> AuthServer:
    auth_server.jwks = {"keys": [public_jwk(keys.rsa, "a"), public_jwk(keys.ec, "e"), public_jwk(keys.ed, "d")]}
    return auth_server


async def refused(v: JWTVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as info:
        await v.verify(token)
    return info.value.description


@pytest.mark.req("AU-05")
@pytest.mark.asyncio
async def test_a_valid_token_gives_exactly_its_claims(server: AuthServer, keys: Keys, clock: Clock) -> None:
    claims = payload(clock)
    token = await verifier(server, clock).verify(mint(keys.rsa, claims))
    assert token == AccessToken(
        subject="alice", client_id="app-1", scopes=frozenset({"files:read", "files:write"}),
        expires_at=float(claims["exp"]), audience=(AUDIENCE,), issuer=ISSUER,
    )
    assert dict(token.claims) == claims
    with pytest.raises(TypeError):
        token.claims["sub"] = "mallory"  # type: ignore[index]


@pytest.mark.asyncio
@pytest.mark.parametrize(("which", "kid", "alg"), [("ec", "e", "ES256"), ("ed", "d", "EdDSA")])
async def test_ec_and_eddsa_tokens_verify(server: AuthServer, keys: Keys, clock: Clock, which: str, kid: str,
                                          alg: str) -> None:
    token = await verifier(server, clock).verify(mint(getattr(keys, which), payload(clock), kid=kid, alg=alg))
    assert token.subject == "alice"


@pytest.mark.req("AU-05", "AU-06")
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"exp": 1_750_000_000 - 31}, "token expired"),
        ({"nbf": 1_750_000_000 + 31}, "token not yet valid"),
        ({"iat": 1_750_000_000 + 31}, "token issued in the future"),
        ({"iss": "https://evil.example.com/"}, "wrong issuer"),
        ({"iss": ISSUER.rstrip("/")}, "wrong issuer"),
        ({"sub": None}, "missing claim: sub"),
        ({"exp": None}, "missing claim: exp"),
        ({"exp": "tomorrow"}, "malformed claim: exp"),
        ({"sub": 42}, "malformed claim: sub"),
        ({"scp": {"files:read": True}}, "malformed claim: scp"),
    ],
)
async def test_claims_are_checked(server: AuthServer, keys: Keys, clock: Clock, changes: dict[str, Any],
                                  reason: str) -> None:
    assert await refused(verifier(server, clock), mint(keys.rsa, payload(clock, **changes))) == reason


@pytest.mark.asyncio
async def test_leeway_is_honoured(server: AuthServer, keys: Keys, clock: Clock) -> None:
    v = verifier(server, clock, leeway=30)
    now = int(clock.now)
    assert (await v.verify(mint(keys.rsa, payload(clock, exp=now - 29)))).subject == "alice"
    assert (await v.verify(mint(keys.rsa, payload(clock, nbf=now + 29)))).subject == "alice"
    strict = verifier(server, clock, leeway=0)
    assert await refused(strict, mint(keys.rsa, payload(clock, exp=now))) == "token expired"
    assert await refused(strict, mint(keys.rsa, payload(clock, nbf=now + 1))) == "token not yet valid"


@pytest.mark.req("AU-05", "AU-07", "SEC-01")
@pytest.mark.asyncio
@pytest.mark.parametrize(
    "aud",
    ["https://other.example.com/mcp", AUDIENCE + "/", ["https://other.example.com/mcp"], [], None],
)
async def test_a_token_for_another_audience_is_refused(server: AuthServer, keys: Keys, clock: Clock, aud: Any) -> None:
    # aud is checked even when required_claims leaves it out: no token passthrough.
    v = verifier(server, clock, required_claims=("exp", "sub"))
    reason = await refused(v, mint(keys.rsa, payload(clock, aud=aud)))
    assert reason == ("missing claim: aud" if aud is None else "wrong audience")


@pytest.mark.req("AU-05", "AU-15")
@pytest.mark.asyncio
async def test_audience_lists_and_case_of_scheme_and_host(server: AuthServer, keys: Keys, clock: Clock) -> None:
    v = verifier(server, clock)
    many = await v.verify(mint(keys.rsa, payload(clock, aud=["https://other.example.com", AUDIENCE])))
    assert many.audience == ("https://other.example.com", AUDIENCE)
    assert (await v.verify(mint(keys.rsa, payload(clock, aud="HTTPS://MCP.Example.com/mcp")))).subject == "alice"
    assert await refused(v, mint(keys.rsa, payload(clock, aud="https://mcp.example.com/MCP"))) == "wrong audience"
    both = verifier(server, clock, audience=[AUDIENCE, AUDIENCE + "/"])
    assert (await both.verify(mint(keys.rsa, payload(clock, aud=AUDIENCE + "/")))).subject == "alice"


@pytest.mark.req("AU-05")
@pytest.mark.asyncio
async def test_a_signature_by_another_key_with_the_same_kid_is_refused(server: AuthServer, keys: Keys,
                                                                       clock: Clock) -> None:
    v = verifier(server, clock)
    assert await refused(v, mint(keys.rsa_other, payload(clock), kid="a")) == "bad signature"
    good = mint(keys.rsa, payload(clock))
    head, _, sig = good.split(".")
    tampered = b64url(json.dumps(payload(clock, sub="mallory")).encode())
    assert await refused(v, f"{head}.{tampered}.{sig}") == "bad signature"


@pytest.mark.req("AU-05")
@pytest.mark.asyncio
async def test_alg_none_is_refused(server: AuthServer, clock: Clock) -> None:
    for header in ({"alg": "none", "typ": "JWT", "kid": "a"}, {"alg": "none"}, {"alg": "None"}):
        token = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(payload(clock)).encode())}."
        assert await refused(verifier(server, clock), token) == "algorithm not allowed"
    with pytest.raises(ValueError):
        JWTVerifier(ISSUER, AUDIENCE, jwks={"keys": []}, algorithms=("none",))


def _hs256(secret: bytes, header: dict[str, Any], claims: dict[str, Any]) -> str:
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    return f"{signing_input}.{b64url(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"


@pytest.mark.req("AU-05")
@pytest.mark.asyncio
async def test_algorithm_confusion_is_refused(server: AuthServer, keys: Keys, clock: Clock) -> None:
    pem = keys.rsa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    forged = _hs256(pem, {"alg": "HS256", "typ": "at+jwt", "kid": "a"}, payload(clock))
    assert await refused(verifier(server, clock), forged) == "algorithm not allowed"
    # Even with HS256 allowed, an RSA key is never used as an HMAC secret.
    assert await refused(verifier(server, clock, algorithms=("RS256", "HS256")), forged) == "algorithm not allowed"
    # An oct key in the JWKS is ignored unless HMAC is explicitly allowed.
    secret = b"a-shared-secret-of-32-bytes-long!"
    server.jwks["keys"].append({"kty": "oct", "kid": "h", "k": b64url(secret)})
    hs = _hs256(secret, {"alg": "HS256", "typ": "at+jwt", "kid": "h"}, payload(clock))
    assert await refused(verifier(server, clock), hs) == "algorithm not allowed"
    assert (await verifier(server, clock, algorithms=("HS256",)).verify(hs)).subject == "alice"


@pytest.mark.asyncio
async def test_algorithms_outside_the_allow_list_or_the_key_are_refused(server: AuthServer, keys: Keys,
                                                                         clock: Clock) -> None:
    v = verifier(server, clock, algorithms=("RS256",))
    assert await refused(v, mint(keys.rsa, payload(clock), alg="RS384")) == "algorithm not allowed"
    assert await refused(v, mint(keys.ec, payload(clock), kid="e", alg="ES256")) == "algorithm not allowed"
    # kid "a" is an RSA key: an ES256 header naming it does not fit.
    assert await refused(verifier(server, clock), mint(keys.ec, payload(clock), kid="a", alg="ES256")) == (
        "algorithm not allowed")
    # a JWK that pins its alg is used with that alg only
    server.jwks = {"keys": [public_jwk(keys.rsa, "a", alg="PS256")]}
    assert await refused(verifier(server, clock), mint(keys.rsa, payload(clock))) == "algorithm not allowed"


@pytest.mark.asyncio
@pytest.mark.parametrize("token", ["", "abc", "a.b", "a.b.c", "a.b.c.d.e", "é.é.é", "x" * 70_000])
async def test_malformed_tokens(server: AuthServer, clock: Clock, token: str) -> None:
    assert await refused(verifier(server, clock), token) == "malformed token"


@pytest.mark.asyncio
async def test_unknown_kid_refetches_once_then_fails(server: AuthServer, keys: Keys, clock: Clock) -> None:
    v = verifier(server, clock, jwks_min_refresh=10)
    await v.verify(mint(keys.rsa, payload(clock)))
    assert server.jwks_requests == 1
    clock.now += 60  # cache still fresh (ttl 300) but the last fetch is older than jwks_min_refresh
    assert await refused(v, mint(keys.rsa_other, payload(clock), kid="zz")) == "unknown key id"
    assert server.jwks_requests == 2


@pytest.mark.asyncio
async def test_unknown_kids_cannot_hammer_the_jwks_endpoint(server: AuthServer, keys: Keys, clock: Clock) -> None:
    v = verifier(server, clock, jwks_min_refresh=10)
    await v.verify(mint(keys.rsa, payload(clock)))
    clock.now += 60
    for kid in ("x1", "x2", "x3"):
        assert await refused(v, mint(keys.rsa_other, payload(clock), kid=kid)) == "unknown key id"
        clock.now += 3
    assert server.jwks_requests == 2  # the first unknown kid refetched; the next two within 10 s did not
    clock.now += 5
    await refused(v, mint(keys.rsa_other, payload(clock), kid="x4"))
    assert server.jwks_requests == 3


@pytest.mark.asyncio
async def test_key_rotation_without_a_restart(server: AuthServer, keys: Keys, clock: Clock) -> None:
    server.jwks = {"keys": [public_jwk(keys.rsa, "a")]}
    v = verifier(server, clock)
    assert (await v.verify(mint(keys.rsa, payload(clock)))).subject == "alice"
    server.jwks = {"keys": [public_jwk(keys.rsa, "a"), public_jwk(keys.rsa_other, "b")]}  # the IdP rotates
    clock.now += 30
    rotated = await v.verify(mint(keys.rsa_other, payload(clock, sub="bob"), kid="b"))
    assert rotated.subject == "bob"
    assert server.jwks_requests == 2
    server.jwks = {"keys": [public_jwk(keys.rsa_other, "b")]}  # the old key is retired
    clock.now += 300  # the cache expires
    assert await refused(v, mint(keys.rsa, payload(clock))) == "unknown key id"


@pytest.mark.asyncio
async def test_concurrent_verifications_share_one_fetch(server: AuthServer, keys: Keys, clock: Clock) -> None:
    v = verifier(server, clock)
    tokens = [mint(keys.rsa, payload(clock, sub=f"user{i}")) for i in range(20)]
    results = await asyncio.gather(*(v.verify(t) for t in tokens))
    assert [r.subject for r in results] == [f"user{i}" for i in range(20)]
    assert server.jwks_requests == 1


@pytest.mark.asyncio
async def test_a_failed_fetch_keeps_the_cached_keys(server: AuthServer, keys: Keys, clock: Clock,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    v = verifier(server, clock)
    await v.verify(mint(keys.rsa, payload(clock)))
    server.jwks_status = 503
    clock.now += 400  # stale: a refetch is attempted and fails
    with caplog.at_level(logging.WARNING, logger="mcpkit.auth"):
        assert (await v.verify(mint(keys.rsa, payload(clock)))).subject == "alice"
    assert server.jwks_requests == 2
    assert "cannot fetch the JWKS" in caplog.text


@pytest.mark.asyncio
async def test_no_keys_at_all_is_an_invalid_token_and_a_warning(server: AuthServer, keys: Keys, clock: Clock,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    server.jwks_status = 500
    v = verifier(server, clock)
    token = mint(keys.rsa, payload(clock))
    with caplog.at_level(logging.WARNING, logger="mcpkit.auth"):
        assert await refused(v, token) == "cannot fetch the signing keys"
    assert "cannot fetch the JWKS" in caplog.text
    assert token not in caplog.text
    assert await refused(v, token) == "cannot fetch the signing keys"
    assert server.jwks_requests == 1  # retried only after jwks_min_refresh
    server.jwks_status = 200
    clock.now += 11
    assert (await v.verify(token)).subject == "alice"


@pytest.mark.req("AU-05")
@pytest.mark.asyncio
async def test_scopes_from_scope_and_scp(keys: Keys, clock: Clock) -> None:
    v = JWTVerifier(ISSUER, AUDIENCE, jwks={"keys": [public_jwk(keys.rsa, "a")]}, clock=clock)
    assert (await v.verify(mint(keys.rsa, payload(clock, scope="a b  c")))).scopes == {"a", "b", "c"}
    token = await v.verify(mint(keys.rsa, payload(clock, scope=None, scp=["files:read", "files:write"])))
    assert token.scopes == {"files:read", "files:write"}
    assert token.has_scopes(["files:read"]) and token.missing_scopes(["admin", "files:read", "x"]) == ["admin", "x"]
    assert (await v.verify(mint(keys.rsa, payload(clock, scope=None, scp="a b")))).scopes == {"a", "b"}
    assert (await v.verify(mint(keys.rsa, payload(clock, scope=None)))).scopes == frozenset()
    only_scp = JWTVerifier(ISSUER, AUDIENCE, jwks={"keys": [public_jwk(keys.rsa, "a")]}, clock=clock,
                           scope_claims=("scp",))
    assert (await only_scp.verify(mint(keys.rsa, payload(clock, scp=["x"])))).scopes == {"x"}


@pytest.mark.asyncio
async def test_client_id_comes_from_client_id_azp_or_cid(keys: Keys, clock: Clock) -> None:
    v = JWTVerifier(ISSUER, AUDIENCE, jwks={"keys": [public_jwk(keys.rsa, "a")]}, clock=clock)
    assert (await v.verify(mint(keys.rsa, payload(clock, client_id=None, azp="web")))).client_id == "web"
    assert (await v.verify(mint(keys.rsa, payload(clock, client_id=None, cid="okta")))).client_id == "okta"
    assert (await v.verify(mint(keys.rsa, payload(clock, client_id=None)))).client_id is None


@pytest.mark.asyncio
async def test_tokens_without_kid(keys: Keys, clock: Clock) -> None:
    single = JWTVerifier(ISSUER, AUDIENCE, jwks={"keys": [public_jwk(keys.rsa, None)]}, clock=clock)
    assert (await single.verify(mint(keys.rsa, payload(clock), kid=None))).subject == "alice"
    several = JWTVerifier(ISSUER, AUDIENCE, clock=clock, jwks={"keys": [
        public_jwk(keys.rsa_other, "b"), public_jwk(keys.ec, "e"), public_jwk(keys.rsa, "a")]})
    assert (await several.verify(mint(keys.rsa, payload(clock), kid=None))).subject == "alice"
    assert (await several.verify(mint(keys.ec, payload(clock), kid=None, alg="ES256"))).subject == "alice"
    assert await refused(several, mint(keys.ed, payload(clock), kid=None, alg="EdDSA")) == "algorithm not allowed"


def test_unusable_keys_in_a_jwks_are_skipped(keys: Keys) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    v = JWTVerifier(ISSUER, AUDIENCE, jwks={"keys": [
        {"kty": "RSA", "kid": "broken", "n": "AQAB"},
        {**public_jwk(keys.rsa_other, "enc"), "use": "enc"},
        public_jwk(weak, "weak"),
        "not a key",
        public_jwk(keys.rsa, "a"),
    ]})
    assert [k.kid for k in v._keys or []] == ["a"]


@pytest.mark.req("AU-05")
def test_construction_checks_its_arguments() -> None:
    jwks: dict[str, Any] = {"keys": []}
    with pytest.raises(ValueError, match="https"):
        JWTVerifier(ISSUER, AUDIENCE, jwks_uri="http://auth.example.com/jwks")
    with pytest.raises(ValueError, match="https"):
        JWTVerifier(ISSUER, AUDIENCE, jwks_uri="ftp://localhost/jwks")
    JWTVerifier(ISSUER, AUDIENCE, jwks_uri="https://auth.example.com/jwks")
    for local in ("http://localhost:8080/jwks", "http://127.0.0.1/jwks", "http://[::1]:9/jwks"):
        JWTVerifier(ISSUER, AUDIENCE, jwks_uri=local)
    with pytest.raises(ValueError, match="exactly one"):
        JWTVerifier(ISSUER, AUDIENCE)
    with pytest.raises(ValueError, match="exactly one"):
        JWTVerifier(ISSUER, AUDIENCE, jwks=jwks, jwks_uri="https://auth.example.com/jwks")
    with pytest.raises(ValueError, match="audience"):
        JWTVerifier(ISSUER, "", jwks=jwks)
    with pytest.raises(ValueError, match="audience"):
        JWTVerifier(ISSUER, [], jwks=jwks)
    with pytest.raises(ValueError, match="issuer"):
        JWTVerifier("", AUDIENCE, jwks=jwks)
    with pytest.raises(ValueError, match="unsupported"):
        JWTVerifier(ISSUER, AUDIENCE, jwks=jwks, algorithms=("RS256", "XX1"))
    with pytest.raises(ValueError, match="keys"):
        JWTVerifier(ISSUER, AUDIENCE, jwks={"kty": "RSA"})


@pytest.mark.asyncio
async def test_jwks_redirects_are_followed_only_to_secure_or_local_urls(server: AuthServer, keys: Keys,
                                                                        clock: Clock) -> None:
    server.jwks_redirect = server.base + "/moved/jwks"
    assert (await verifier(server, clock).verify(mint(keys.rsa, payload(clock)))).subject == "alice"
    server.jwks_redirect = "http://jwks.example.com/jwks"  # a downgrade to clear text over the network
    assert await refused(verifier(server, clock), mint(keys.rsa, payload(clock))) == "cannot fetch the signing keys"
