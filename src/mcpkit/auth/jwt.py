"""JWT access tokens (RFC 9068 style) verified against the issuer's JWKS.

The checks, in order, each failing with its own short ``InvalidToken`` description:

- shape: three base64url segments (``"malformed token"``; JWE is not accepted);
- ``typ`` (``"wrong token type"``): an access token says ``at+jwt`` (RFC 9068 §2.1, with or without
  ``application/``). Identity providers that still issue access tokens as plain ``JWT`` (or
  with no ``typ``) are served only when ``token_types`` lists ``"JWT"``: a choice to make
  knowingly, since an ID token is a plain JWT too (RFC 8725 §3.11: explicit typing keeps one
  kind of token from passing for another). ID-token-like types (``id_token``, ``id+jwt``,
  ``logout+jwt``, ...) can never be listed;
- ``alg`` in the allow-list (``"algorithm not allowed"``). ``none`` is never allowed, and HMAC
  algorithms only when listed explicitly; a key is used only with algorithms of its own type
  (RSA → RS*/PS*, EC → ES* of its curve, OKP → EdDSA, oct → HS*), which defeats algorithm
  confusion (an HS256 token "signed" with the RSA public key);
- the key: chosen by the header's ``kid`` (``"unknown key id"``); without ``kid``, the keys of
  the JWKS that fit ``alg`` are tried, at most 8 (an IdP with one key often omits ``kid``).
  Keys named by the token (``jku``, ``jwk``, ``x5u``) are ignored: keys come only from the
  configured JWKS;
- signature (``"bad signature"``); then claims: required ones present (``"missing claim: sub"``),
  ``iss`` exactly equal (``"wrong issuer"``), ``aud`` naming this server (``"wrong audience"``,
  AU-05, SEC-01), ``exp``/``nbf``/``iat`` with ``leeway`` (``"token expired"``, ...).

Audience: an exact match against one of the configured values (RFC 8707 canonical URIs), except
that the scheme and host compare case-insensitively (AU-15). A trailing slash is significant:
list both forms in ``audience`` if the authorization server issues both. The audience check
cannot be turned off: a token without ``aud`` is refused even if ``required_claims`` omits it.

The JWKS is fetched from ``jwks_uri`` (HTTPS, or HTTP to localhost) in a worker thread, cached
for ``jwks_cache_ttl`` seconds, and refetched when a token names an unknown ``kid`` — which is
how key rotation works without a restart — but never more often than every
``jwks_min_refresh`` seconds, so garbage ``kid`` values cannot hammer the IdP. Concurrent
verifications share one fetch. When a fetch fails the cached keys stay in use.

PyJWT and cryptography are imported when a verifier is built, never by ``import mcpkit``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._extras import needs
from .tokens import AccessToken, InvalidToken, audience_key, check_endpoint_url, http_request, parse_scopes

__all__ = ["DEFAULT_ALGORITHMS", "DEFAULT_TOKEN_TYPES", "SUPPORTED_ALGORITHMS", "JWTVerifier"]

log = logging.getLogger("mcpkit.auth")

DEFAULT_ALGORITHMS = ("RS256", "ES256", "PS256", "EdDSA")
#: RFC 9068 §2.1: the ``typ`` of a JWT access token
DEFAULT_TOKEN_TYPES = ("at+jwt",)
#: types of tokens that are not access tokens; never accepted, whatever ``token_types`` says
_NOT_ACCESS_TOKENS = frozenset({"id_token", "id-token", "idtoken", "id+jwt", "id_token+jwt", "logout+jwt",
                                "secevent+jwt", "dpop+jwt", "jwk-set+jwt", "token-introspection+jwt"})

# algorithm → (kty, curves it may use or None for any)
_KEY_TYPES: dict[str, tuple[str, frozenset[str] | None]] = {
    **{f"{p}{n}": ("RSA", None) for p in ("RS", "PS") for n in (256, 384, 512)},
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "ES512": ("EC", frozenset({"P-521"})),
    "ES256K": ("EC", frozenset({"secp256k1"})),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
    **{f"HS{n}": ("oct", None) for n in (256, 384, 512)},
}
SUPPORTED_ALGORITHMS = frozenset(_KEY_TYPES)
MAX_TOKEN_LENGTH = 64 * 1024
MIN_RSA_BITS = 2048
#: Without a ``kid``, at most this many fitting keys are tried (bounds the work per token).
MAX_KEYS_WITHOUT_KID = 8


class _Key:
    __slots__ = ("alg", "crv", "key", "kid", "kty")

    def __init__(self, kid: str | None, kty: str, crv: str | None, alg: str | None, key: Any) -> None:
        self.kid, self.kty, self.crv, self.alg, self.key = kid, kty, crv, alg, key

    def fits(self, alg: str) -> bool:
        kty, curves = _KEY_TYPES[alg]
        return self.kty == kty and (curves is None or self.crv in curves) and self.alg in (None, alg)


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"malformed claim: {name}")
    return float(value)


class JWTVerifier:
    """Verifies JWT access tokens issued by ``issuer`` for ``audience`` (this server's URI)."""

    def __init__(
        self,
        issuer: str,
        audience: str | Sequence[str],
        *,
        jwks_uri: str | None = None,
        jwks: Mapping[str, Any] | None = None,
        algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
        leeway: float = 30.0,
        required_claims: Sequence[str] = ("exp", "iss", "aud", "sub"),
        scope_claims: Sequence[str] = ("scope", "scp"),
        jwks_cache_ttl: float = 300.0,
        jwks_min_refresh: float = 10.0,
        http_timeout: float = 5.0,
        token_types: Sequence[str] = DEFAULT_TOKEN_TYPES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        with needs("auth", "JWTVerifier"):
            import cryptography  # noqa: F401
            import jwt  # noqa: F401
        if not isinstance(issuer, str) or not issuer:
            raise ValueError("issuer must be a non-empty string")
        audiences = (audience,) if isinstance(audience, str) else tuple(audience)
        if not audiences or not all(isinstance(a, str) and a for a in audiences):
            raise ValueError("audience must be this server's canonical URI (or a list of them), non-empty (AU-05)")
        algorithms = tuple(algorithms)
        unknown = [a for a in algorithms if a not in SUPPORTED_ALGORITHMS]
        if unknown or not algorithms:
            raise ValueError(f"unsupported algorithms {unknown}; choose from {sorted(SUPPORTED_ALGORITHMS)}")
        if (jwks_uri is None) == (jwks is None):
            raise ValueError("give exactly one of jwks_uri and jwks")
        types = tuple(_media_type(t) for t in ((token_types,) if isinstance(token_types, str) else token_types))
        if not types:
            raise ValueError("token_types must name at least one type, e.g. 'at+jwt' (RFC 9068)")
        refused = [t for t in types if t in _NOT_ACCESS_TOKENS]
        if refused:
            raise ValueError(f"token_types may not include {refused}: those tokens are not access tokens")
        #: the accepted ``typ`` values, normalised; "jwt" also accepts a token without ``typ``
        self.token_types = frozenset(types)
        self.issuer = issuer
        self.audience = audiences
        self._audiences = frozenset(audience_key(a) for a in audiences)
        self.algorithms = algorithms
        self.leeway = float(leeway)
        self.required_claims = tuple(required_claims)
        self.scope_claims = tuple(scope_claims)
        self.jwks_uri = None if jwks_uri is None else check_endpoint_url(jwks_uri, "jwks_uri")
        self._ttl = float(jwks_cache_ttl)
        self._min_refresh = float(jwks_min_refresh)
        self._timeout = float(http_timeout)
        self._clock = clock
        self._keys: list[_Key] | None = None
        self._fetched_at: float | None = None  # last successful fetch
        self._attempted_at: float | None = None  # last fetch attempt, successful or not
        self._generation = 0  # bumped by every fetch attempt, so waiters can tell one happened
        self._lock = asyncio.Lock()
        self.fetch_count = 0
        if jwks is not None:
            self._keys = self._parse_jwks(jwks)

    def __repr__(self) -> str:
        return f"JWTVerifier(issuer={self.issuer!r}, audience={self.audience!r})"

    # -- keys ----------------------------------------------------------------------------------

    def _parse_jwks(self, jwks: Any) -> list[_Key]:
        with needs("auth", "JWTVerifier"):
            from jwt import algorithms as jwa

        if not isinstance(jwks, Mapping):
            raise TypeError("a JWKS is a JSON object with a 'keys' list")
        if not isinstance(jwks.get("keys"), list):
            raise ValueError("a JWKS is a JSON object with a 'keys' list")  # noqa: TRY004 - a shape error
        builders = {"RSA": jwa.RSAAlgorithm, "EC": jwa.ECAlgorithm, "OKP": jwa.OKPAlgorithm, "oct": jwa.HMACAlgorithm}
        keys: list[_Key] = []
        for jwk in jwks["keys"]:
            if not isinstance(jwk, dict):
                continue
            kty, kid, alg, crv = jwk.get("kty"), jwk.get("kid"), jwk.get("alg"), jwk.get("crv")
            if jwk.get("use", "sig") != "sig" or ("key_ops" in jwk and "verify" not in (jwk["key_ops"] or ())):
                continue  # an encryption key
            if not isinstance(kid, (str, type(None))) or not isinstance(alg, (str, type(None))):
                continue
            if not any(kty == _KEY_TYPES[a][0] for a in self.algorithms):
                continue  # e.g. an oct key while no HMAC algorithm is allowed
            if alg is not None and alg not in self.algorithms:
                continue
            builder = builders.get(kty)  # type: ignore[arg-type]
            if builder is None:
                continue
            try:
                key = builder.from_jwk(jwk)
            except Exception as exc:  # noqa: BLE001 - one bad key must not hide the others
                log.warning("skipping an unusable JWKS key (kid %r): %s", kid, type(exc).__name__)
                continue
            if kty == "RSA" and getattr(key, "key_size", MIN_RSA_BITS) < MIN_RSA_BITS:
                log.warning("skipping RSA key %r: shorter than %d bits", kid, MIN_RSA_BITS)
                continue
            keys.append(_Key(kid, kty, crv if isinstance(crv, str) else None, alg, key))
        return keys

    def _fetch_sync(self) -> list[_Key]:
        from mcpkit import _json

        assert self.jwks_uri is not None
        status, body = http_request(self.jwks_uri, headers={"Accept": "application/json"}, timeout=self._timeout,
                                    follow_redirects=True)
        if status != 200:
            raise OSError(f"HTTP {status}")
        return self._parse_jwks(_json.loads(body))

    async def _get_keys(self, refresh: bool = False) -> list[_Key]:
        """The current keys; fetched when missing or stale, or (``refresh``) for an unknown kid."""
        if self.jwks_uri is None:
            assert self._keys is not None
            return self._keys
        if self._keys is not None and not self._wants_fetch(refresh):
            return self._keys
        generation = self._generation
        async with self._lock:
            # Someone else fetched while this one waited: use theirs (one fetch for a burst).
            if self._generation == generation and self._wants_fetch(refresh):
                self._generation += 1
                self._attempted_at = self._clock()
                self.fetch_count += 1
                try:
                    keys = await asyncio.to_thread(self._fetch_sync)
                except Exception as exc:  # noqa: BLE001 - network, HTTP status, JSON, shape
                    log.warning("cannot fetch the JWKS from %s (%s: %s)%s", self.jwks_uri, type(exc).__name__,
                                exc, "; using the cached keys" if self._keys is not None else "")
                else:
                    self._keys, self._fetched_at = keys, self._clock()
        if self._keys is None:
            raise InvalidToken("cannot fetch the signing keys")
        return self._keys

    def _wants_fetch(self, refresh: bool) -> bool:
        now = self._clock()
        if self._attempted_at is not None and now - self._attempted_at < self._min_refresh:
            return False  # rate limit, also after a failure: an unreachable IdP is not asked per request
        if self._keys is None or self._fetched_at is None:
            return True
        return refresh or now - self._fetched_at >= self._ttl

    async def _candidates(self, header: Mapping[str, Any], alg: str) -> list[_Key]:
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("malformed token")
        keys = await self._get_keys()
        if kid is not None:
            named = [k for k in keys if k.kid == kid]
            if not named:
                keys = await self._get_keys(refresh=True)  # key rotation
                named = [k for k in keys if k.kid == kid]
            if not named:
                raise InvalidToken("unknown key id")
            fitting = [k for k in named if k.fits(alg)]
        else:
            fitting = [k for k in keys if k.fits(alg)][:MAX_KEYS_WITHOUT_KID]
            if not keys:
                raise InvalidToken("unknown key id")
        if not fitting:
            raise InvalidToken("algorithm not allowed")
        return fitting

    # -- verification --------------------------------------------------------------------------

    async def verify(self, token: str) -> AccessToken:
        with needs("auth", "JWTVerifier"):
            import jwt
            from jwt.api_jws import PyJWS

        from mcpkit import _json

        if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH or token.count(".") != 2:
            raise InvalidToken("malformed token")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("malformed token") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidToken("algorithm not allowed")
        if "crit" in header:
            raise InvalidToken("unsupported critical header")
        typ = header.get("typ", "JWT")
        if not isinstance(typ, str) or _media_type(typ) not in self.token_types or _media_type(typ) in _NOT_ACCESS_TOKENS:
            raise InvalidToken("wrong token type")
        payload: bytes | None = None
        for key in await self._candidates(header, alg):
            try:
                payload = PyJWS().decode_complete(token, key=key.key, algorithms=[alg])["payload"]
                break
            except jwt.InvalidSignatureError:
                continue
            except jwt.InvalidAlgorithmError:
                raise InvalidToken("algorithm not allowed") from None
            except Exception as exc:  # noqa: BLE001 - PyJWTError, or a crypto library ValueError
                log.debug("JWT refused: %s", type(exc).__name__)
                raise InvalidToken("malformed token") from None
        if payload is None:
            raise InvalidToken("bad signature")
        try:
            claims = _json.loads(payload)
        except _json.JSONDecodeError:
            raise InvalidToken("malformed token") from None
        if not isinstance(claims, dict):
            raise InvalidToken("malformed token")
        return self._check_claims(claims)

    def _check_claims(self, claims: dict[str, Any]) -> AccessToken:
        for name in (*self.required_claims, "aud"):
            if claims.get(name) is None:
                raise InvalidToken(f"missing claim: {name}")
        if claims.get("iss") is not None and claims["iss"] != self.issuer:
            raise InvalidToken("wrong issuer")
        aud = claims["aud"]
        audience = (aud,) if isinstance(aud, str) else aud
        if not isinstance(audience, list | tuple) or not all(isinstance(a, str) for a in audience):
            raise InvalidToken("malformed claim: aud")
        # AU-05 / AU-07 / SEC-01: the token must name this server, or it was meant for another one.
        if not any(audience_key(a) in self._audiences for a in audience):
            raise InvalidToken("wrong audience")
        now = self._clock()
        exp, nbf, iat = _number(claims, "exp"), _number(claims, "nbf"), _number(claims, "iat")
        if exp is not None and now - self.leeway >= exp:
            raise InvalidToken("token expired")
        if nbf is not None and now + self.leeway < nbf:
            raise InvalidToken("token not yet valid")
        if iat is not None and now + self.leeway < iat:
            raise InvalidToken("token issued in the future")
        subject = claims.get("sub")
        client_id = next((claims[c] for c in ("client_id", "azp", "cid") if isinstance(claims.get(c), str)), None)
        if subject is None:
            subject = client_id  # a client-credentials token, when "sub" is not required
        if not isinstance(subject, str) or not subject:
            raise InvalidToken("missing claim: sub" if subject is None else "malformed claim: sub")
        scopes: frozenset[str] = frozenset()
        for name in self.scope_claims:
            try:
                scopes |= parse_scopes(claims.get(name))
            except TypeError:
                raise InvalidToken(f"malformed claim: {name}") from None
        issuer = claims.get("iss")
        return AccessToken(subject=subject, client_id=client_id, scopes=scopes, expires_at=exp,
                           audience=tuple(audience), issuer=issuer if isinstance(issuer, str) else None, claims=claims)


def _media_type(typ: str) -> str:
    """RFC 7515 §4.1.9: ``typ`` is a media type, compared case-insensitively, whose
    ``application/`` prefix may be left out."""
    typ = typ.strip().lower()
    return typ[len("application/"):] if typ.startswith("application/") else typ
