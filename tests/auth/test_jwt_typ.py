"""JWT ``typ``: access tokens say ``at+jwt`` (RFC 9068 §2.1); a plain ``JWT`` is served only when the
operator says so, and ID-token-like types never are (RFC 8725 §3.11: explicit typing)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import jwt
import pytest

from mcpkit.auth import JWTVerifier
from tests.auth.conftest import AuthServer, Clock, Keys, public_jwk
from tests.auth.test_jwt import AUDIENCE, ISSUER, payload, refused


def mint(key: Any, claims: dict[str, Any], typ: str | None) -> str:
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "a", "typ": typ or "x"})
    if typ is None:  # PyJWT always writes a typ: rebuild the header without one
        import base64
        import json

        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        head = b64(json.dumps({"alg": "RS256", "kid": "a"}).encode())
        body = b64(json.dumps(claims).encode())
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        signature = key.sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        token = f"{head}.{body}.{b64(signature)}"
    return token


@pytest.fixture
def server(auth_server: AuthServer, keys: Keys) -> AuthServer:
    auth_server.jwks = {"keys": [public_jwk(keys.rsa, "a")]}
    return auth_server


def verifier(server: AuthServer, clock: Clock, **options: Any) -> JWTVerifier:
    return JWTVerifier(ISSUER, AUDIENCE, jwks_uri=server.jwks_uri, clock=clock, **options)


@pytest.mark.asyncio
@pytest.mark.parametrize("typ", ["at+jwt", "AT+JWT", "application/at+jwt", "Application/AT+JWT"])
async def test_an_access_token_typ_is_accepted_by_default(server, keys, clock, typ):
    assert (await verifier(server, clock).verify(mint(keys.rsa, payload(clock), typ))).subject == "alice"


@pytest.mark.asyncio
@pytest.mark.parametrize("typ", ["JWT", "jwt", None, "id_token", "id+jwt", "logout+jwt", "secevent+jwt", "JOSE", ""])
async def test_other_types_are_refused_by_default(server, keys, clock, typ):
    assert await refused(verifier(server, clock), mint(keys.rsa, payload(clock), typ)) == "wrong token type"


@pytest.mark.asyncio
@pytest.mark.parametrize("typ", ["JWT", "application/jwt", None])
async def test_plain_jwt_is_served_when_the_operator_lists_it(server, keys, clock, typ):
    v = verifier(server, clock, token_types=("at+jwt", "JWT"))
    assert (await v.verify(mint(keys.rsa, payload(clock), typ))).subject == "alice"
    # ID tokens stay refused even then
    assert await refused(v, mint(keys.rsa, payload(clock), "id_token")) == "wrong token type"


@pytest.mark.parametrize("types", [("id_token",), ("at+jwt", "logout+jwt"), ()])
def test_types_that_are_not_access_tokens_cannot_be_listed(types):
    with pytest.raises(ValueError):
        JWTVerifier(ISSUER, AUDIENCE, jwks={"keys": []}, token_types=types)


def test_the_cli_option_and_its_environment_variable(tmp_path):
    from mcpkit.cli import _parser
    from mcpkit.cli_serving import auth_of as _auth

    args = _parser(["serve"]).parse_args(["serve", "--http", "127.0.0.1:1", "--auth", "jwt", "--issuer", ISSUER,
                                          "--resource", AUDIENCE, "--jwt-types", "at+jwt,JWT"])
    assert _auth(args).verifier.token_types == frozenset({"at+jwt", "jwt"})
    args = _parser(["serve"]).parse_args(["serve", "--http", "127.0.0.1:1", "--auth", "jwt", "--issuer", ISSUER,
                                          "--resource", AUDIENCE])
    assert _auth(args).verifier.token_types == frozenset({"at+jwt"})
    proc = subprocess.run([sys.executable, "-m", "mcpkit", "serve", "--http", "127.0.0.1:1", "--auth", "jwt",
                           "--issuer", ISSUER, "--resource", AUDIENCE, "--jwt-types", "id_token"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "--jwt-types" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("extra", "expected"), [
    # it said "--jwt-types: jwks_uri must be an https:// URL ...", naming an option not given
    (["--issuer", "id.example.com"], "mcpkit: --issuer: jwks_uri must be an https:// URL"),
    (["--issuer", ISSUER, "--jwks-uri", "keys.example.com/jwks"], "mcpkit: --jwks-uri: jwks_uri must be an https:// URL"),
])
def test_a_bad_url_for_the_keys_names_the_option_that_gave_it(extra, expected):
    proc = subprocess.run([sys.executable, "-m", "mcpkit", "serve", "--http", "127.0.0.1:1", "--auth", "jwt",
                           "--resource", AUDIENCE, *extra], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith(expected) and "--jwt-types" not in proc.stderr, proc.stderr
