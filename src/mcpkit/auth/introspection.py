"""Opaque (or any) access tokens checked with the authorization server: RFC 7662 introspection.

Each new token is POSTed to the introspection endpoint (``token=...&token_type_hint=access_token``,
HTTP Basic client authentication, HTTPS unless localhost). The answer is trusted only when it
says ``"active": true``; ``exp``/``nbf`` are re-checked against our clock, ``iss`` and ``aud`` are
compared with the configured values when the answer carries them (AU-05, SEC-01). When no
``audience`` is configured the server relies on the authorization server, which knows which
resource server is asking (RFC 7662 §4), to report only tokens meant for it; a warning says so.

Answers are cached by SHA-256 of the token (the raw token is never kept, AU-14): positive ones
until ``min(exp, now + cache_ttl)``, negative ones for 5 s to blunt floods of bad tokens.
Concurrent verifications of one token share one request. An unreachable or misbehaving endpoint
(network error, timeout, non-200, non-JSON) never counts as active: the token is refused with
"cannot reach the authorization server" and nothing is cached, so recovery is immediate.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote_plus, urlencode

from .tokens import AccessToken, InvalidToken, audience_key, check_endpoint_url, http_request, parse_scopes

__all__ = ["NEGATIVE_CACHE_TTL", "IntrospectionVerifier"]

log = logging.getLogger("mcpkit.auth")

#: How long a "not active" (or otherwise refused) answer is remembered, in seconds.
NEGATIVE_CACHE_TTL = 5.0
MAX_TOKEN_LENGTH = 64 * 1024
_UNREACHABLE = "cannot reach the authorization server"


class _Unreachable(InvalidToken):
    """The endpoint failed; not a verdict on the token, so never cached."""


class IntrospectionVerifier:
    """A :class:`~mcpkit.auth.tokens.TokenVerifier` asking an RFC 7662 introspection endpoint."""

    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        audience: str | Sequence[str] | None = None,
        issuer: str | None = None,
        cache_ttl: float = 60.0,
        max_cache: int = 10_000,
        http_timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint = check_endpoint_url(endpoint, "introspection endpoint")
        if (client_id is None) != (client_secret is None):
            raise ValueError("give both client_id and client_secret, or neither")
        self._authorization: str | None = None
        if client_id is not None and client_secret is not None:
            # RFC 6749 §2.3.1: form-encode id and secret, then Basic.
            pair = f"{quote_plus(client_id)}:{quote_plus(client_secret)}".encode()
            self._authorization = "Basic " + base64.b64encode(pair).decode("ascii")
        self.client_id = client_id
        if audience is None:
            self.audience: tuple[str, ...] = ()
            log.warning("IntrospectionVerifier(%s) has no audience: the authorization server alone decides whether "
                        "a token is meant for this server (AU-05, SEC-01)", self.endpoint)
        else:
            self.audience = (audience,) if isinstance(audience, str) else tuple(audience)
            if not self.audience or not all(isinstance(a, str) and a for a in self.audience):
                raise ValueError("audience must be a non-empty URI or list of URIs")
        self._audiences = frozenset(audience_key(a) for a in self.audience)
        self.issuer = issuer
        self._ttl = float(cache_ttl)
        self._max = int(max_cache)
        self._timeout = float(http_timeout)
        self._clock = clock
        # sha256(token) → (cached until, token); and → (until, description) for refusals
        self._positive: OrderedDict[bytes, tuple[float, AccessToken]] = OrderedDict()
        self._negative: OrderedDict[bytes, tuple[float, str]] = OrderedDict()
        self._inflight: dict[bytes, asyncio.Future[AccessToken]] = {}
        self.request_count = 0

    def __repr__(self) -> str:
        return f"IntrospectionVerifier({self.endpoint!r})"

    async def verify(self, token: str) -> AccessToken:
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
            raise InvalidToken("malformed token")
        key = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = self._clock()
        hit = self._positive.get(key)
        if hit is not None:
            if now < hit[0]:
                self._positive.move_to_end(key)
                return hit[1]
            del self._positive[key]
        miss = self._negative.get(key)
        if miss is not None:
            if now < miss[0]:
                raise InvalidToken(miss[1])
            del self._negative[key]
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[AccessToken] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            result = await self._introspect(token)
        except BaseException as exc:
            if isinstance(exc, InvalidToken) and not isinstance(exc, _Unreachable):
                self._remember(self._negative, key, (self._clock() + NEGATIVE_CACHE_TTL, exc.description))
            future.set_exception(exc if isinstance(exc, InvalidToken) else _Unreachable(_UNREACHABLE))
            future.exception()  # retrieved: waiters may be none
            raise
        else:
            now = self._clock()
            until = now + self._ttl if result.expires_at is None else min(result.expires_at, now + self._ttl)
            self._remember(self._positive, key, (until, result))
            future.set_result(result)
            return result
        finally:
            del self._inflight[key]

    def _remember(self, cache: OrderedDict[bytes, Any], key: bytes, value: Any) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self._max:
            cache.popitem(last=False)

    async def _introspect(self, token: str) -> AccessToken:
        self.request_count += 1
        try:
            data = await asyncio.to_thread(self._post, token)
        except Exception as exc:  # noqa: BLE001 - network, timeout, HTTP status, JSON
            log.warning("token introspection at %s failed: %s: %s", self.endpoint, type(exc).__name__, exc)
            raise _Unreachable(_UNREACHABLE) from None
        return self._interpret(data)

    def _post(self, token: str) -> dict[str, Any]:
        from mcpkit import _json

        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if self._authorization is not None:
            headers["Authorization"] = self._authorization
        body = urlencode({"token": token, "token_type_hint": "access_token"}).encode("ascii")
        status, answer = http_request(self.endpoint, data=body, headers=headers, timeout=self._timeout)
        if status != 200:
            raise OSError(f"HTTP {status}")
        data = _json.loads(answer)
        if not isinstance(data, dict):
            raise TypeError("the answer is not a JSON object")
        return data

    def _interpret(self, data: dict[str, Any]) -> AccessToken:
        if data.get("active") is not True:
            raise InvalidToken("token not active")
        if data.get("token_type") == "refresh_token":
            raise InvalidToken("not an access token")
        now = self._clock()
        exp, nbf = _number(data, "exp"), _number(data, "nbf")
        if exp is not None and now >= exp:
            raise InvalidToken("token expired")
        if nbf is not None and now < nbf:
            raise InvalidToken("token not yet valid")
        issuer = data.get("iss")
        if self.issuer is not None and issuer is not None and issuer != self.issuer:
            raise InvalidToken("wrong issuer")
        aud = data.get("aud")
        audience: tuple[str, ...] = ()
        if aud is not None:
            if isinstance(aud, str):
                audience = (aud,)
            elif isinstance(aud, list) and all(isinstance(a, str) for a in aud):
                audience = tuple(aud)
            else:
                raise InvalidToken("malformed claim: aud")
            # AU-05 / SEC-01: a token the AS says was issued for another resource is not ours.
            if self._audiences and not any(audience_key(a) in self._audiences for a in audience):
                raise InvalidToken("wrong audience")
        client_id = data.get("client_id") if isinstance(data.get("client_id"), str) else None
        subject = next((data[c] for c in ("sub", "username") if isinstance(data.get(c), str) and data[c]), client_id)
        if not subject:
            raise InvalidToken("missing claim: sub")
        try:
            scopes = parse_scopes(data.get("scope"))
        except TypeError:
            raise InvalidToken("malformed claim: scope") from None
        return AccessToken(subject=subject, client_id=client_id, scopes=scopes, expires_at=exp, audience=audience,
                           issuer=issuer if isinstance(issuer, str) else None, claims=data)


def _number(data: dict[str, Any], name: str) -> float | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"malformed claim: {name}")
    return float(value)
