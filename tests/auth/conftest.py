"""Shared fixtures for the token verifiers: keys made in the test, a settable clock, and a local
HTTP server playing the authorization server (JWKS document and introspection endpoint)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest


class Clock:
    """A clock the test moves by hand: ``clock()`` is the time, ``clock.now += 5`` moves it."""

    def __init__(self, now: float = 1_750_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@dataclass
class Keys:
    rsa: Any
    rsa_other: Any
    ec: Any
    ed: Any


@pytest.fixture(scope="session")
def keys() -> Keys:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    return Keys(
        rsa=rsa.generate_private_key(public_exponent=65537, key_size=2048),
        rsa_other=rsa.generate_private_key(public_exponent=65537, key_size=2048),
        ec=ec.generate_private_key(ec.SECP256R1()),
        ed=ed25519.Ed25519PrivateKey.generate(),
    )


def public_jwk(private_key: Any, kid: str | None, alg: str | None = None) -> dict[str, Any]:
    """The public JWK of ``private_key`` with ``kid`` (and ``alg`` when given)."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from jwt import algorithms as jwa

    public = private_key.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        jwk = json.loads(jwa.RSAAlgorithm.to_jwk(public))
    elif isinstance(public, ec.EllipticCurvePublicKey):
        jwk = json.loads(jwa.ECAlgorithm.to_jwk(public))
    elif isinstance(public, ed25519.Ed25519PublicKey):
        jwk = json.loads(jwa.OKPAlgorithm.to_jwk(public))
    else:  # pragma: no cover
        raise TypeError(type(public))
    jwk.update({"use": "sig"})
    if kid is not None:
        jwk["kid"] = kid
    if alg is not None:
        jwk["alg"] = alg
    return jwk


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class AuthServer:
    """What the local authorization server serves, changeable while it runs."""

    base: str = ""
    jwks: dict[str, Any] = field(default_factory=lambda: {"keys": []})
    jwks_status: int = 200
    jwks_redirect: str | None = None  # answer GET /jwks with a 302 to this URL
    jwks_requests: int = 0
    #: introspection answers by token; unknown tokens get {"active": false}
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    introspect_status: int = 200
    introspect_body: bytes | None = None  # served as is when set (e.g. not JSON)
    client: tuple[str, str] = ("mcp-server", "s3cret:with/odd&chars")
    introspect_requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def jwks_uri(self) -> str:
        return self.base + "/jwks"

    @property
    def introspection_endpoint(self) -> str:
        return self.base + "/introspect"


def _handler(state: AuthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/jwks" and state.jwks_redirect:
                self.send_response(302)
                self.send_header("Location", state.jwks_redirect)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            if self.path not in ("/jwks", "/moved/jwks"):
                return self._send(404, b"{}")
            with state.lock:
                state.jwks_requests += 1
                status, body = state.jwks_status, json.dumps(state.jwks).encode()
            self._send(status, body if status == 200 else b'{"error": "server_error"}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode()
            form = {k: v[0] for k, v in parse_qs(raw).items()}
            with state.lock:
                state.introspect_requests.append(
                    {"authorization": self.headers.get("Authorization"),
                     "content_type": self.headers.get("Content-Type"), "form": form})
            if self.path != "/introspect":
                return self._send(404, b"{}")
            from urllib.parse import quote_plus

            expected = "Basic " + base64.b64encode(
                f"{quote_plus(state.client[0])}:{quote_plus(state.client[1])}".encode()).decode()
            if self.headers.get("Authorization") != expected:
                return self._send(401, b'{"error": "invalid_client"}')
            if state.introspect_status != 200:
                return self._send(state.introspect_status, b'{"error": "server_error"}')
            if state.introspect_body is not None:
                return self._send(200, state.introspect_body, "text/html")
            answer = state.answers.get(form.get("token", ""), {"active": False})
            self._send(200, json.dumps(answer).encode())

    return Handler


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    state = AuthServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


# The Streamable HTTP test clients of tests/test_http.py, for the HTTP-level tests here.
from tests.test_http import clients  # noqa: E402, F401 - a fixture
