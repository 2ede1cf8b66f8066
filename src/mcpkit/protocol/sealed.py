"""Sealed ``requestState`` for multi round-trip requests (MR-06, MR-07). Standard library only.

A client echoes ``requestState`` back verbatim, so the server must treat it as attacker-controlled:
it is encrypted (earlier answers of the user travel in it) and authenticated, and it carries its
expiry and the request it belongs to. Any process holding the same master key opens it.

Construction (version 1). ``H(k, m)`` is HMAC-SHA256.

* Keys: HKDF-SHA256 (RFC 5869) over the master key (at least 16 bytes):
  ``prk = H(b"mcpkit/requestState", master)`` (extract; the master key is the HMAC *message*, so
  keys differing only by trailing zero bytes stay distinct), then
  ``enc_key = H(prk, b"v1/enc" || 0x01)`` and ``mac_key = H(prk, b"v1/mac" || 0x01)`` (expand, one
  32-byte block each, domain-separated labels).
* Plaintext: the orjson encoding of ``{"aud": bind, "exp": unix_seconds, "p": payload}``; no
  compression (it would leak the length of secrets).
* Encryption: a fresh random 16-byte ``nonce`` per seal; keystream block ``i`` (i = 0, 1, ...) is
  ``H(enc_key, nonce || i as 8-byte big-endian)``; ``ciphertext = plaintext XOR keystream``
  (HMAC as a PRF in counter mode).
* Authentication (encrypt-then-MAC): ``tag = H(mac_key, version || nonce || ciphertext)``, all 32
  bytes, checked with :func:`hmac.compare_digest` before anything is decrypted.
* Token: urlsafe base64 without padding of ``version || nonce || ciphertext || tag`` with
  ``version = 0x01``. Only the canonical encoding is accepted, and at most 64 KiB of it.

On open the tag is checked first (any change, the version byte included, is an integrity
failure), then the binding (``aud`` must equal ``bind``), then the expiry (expired once the clock
is past ``exp``). The errors are :class:`StateError` with a fixed message safe to show a client.
A state meant to be used once must additionally be remembered server-side (MR-07); this module
does not do that.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import os
import re
import secrets
import time
from typing import Any, Callable

from mcpkit import _json

__all__ = ["Sealer", "StateError", "digest", "MAX_TOKEN_LENGTH"]

#: Longer tokens are rejected as malformed without decoding them.
MAX_TOKEN_LENGTH = 64 * 1024
_VERSION = b"\x01"
_NONCE = 16
_TAG = 32
_MIN_KEY = 16
_B64 = re.compile(r"[A-Za-z0-9_-]*")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")

MALFORMED = "requestState is malformed"
INTEGRITY = "requestState integrity check failed"
EXPIRED = "requestState expired"
MISMATCH = "requestState belongs to another request"


class StateError(ValueError):
    """A ``requestState`` that cannot be used. The message never contains key or plaintext."""


def digest(obj: Any) -> str:
    """32 hex characters (128 bits) of SHA-256 over the canonical JSON of ``obj``.

    Canonical: object keys sorted, compact separators. Meant for building ``bind`` strings,
    e.g. ``f"tools/call:{digest({'name': name, 'arguments': args})}:{principal}"``.
    """
    return hashlib.sha256(_json.dumps(_canonical(obj))).hexdigest()[:32]


def _canonical(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _canonical(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    return obj


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _parse_key(key: bytes | str) -> bytes:
    if isinstance(key, str):
        text = key.strip()
        if _HEX.fullmatch(text):  # hex wins when a string is both hex and base64
            raw = bytes.fromhex(text)
        else:
            body = text.rstrip("=").replace("+", "-").replace("/", "_")
            if not _B64.fullmatch(body) or len(body) % 4 == 1:
                raise ValueError("state key must be raw bytes, hex, or urlsafe base64")
            raw = _b64decode(body)
    elif isinstance(key, (bytes, bytearray)):
        raw = bytes(key)
    else:
        raise TypeError("state key must be bytes or str")
    if len(raw) < _MIN_KEY:
        raise ValueError(f"state key must have at least {_MIN_KEY} bytes")
    return raw


def _keystream_xor(key: bytes, nonce: bytes, data: bytes) -> bytes:
    blocks = b"".join(
        hmac.digest(key, nonce + i.to_bytes(8, "big"), "sha256") for i in range(-(-len(data) // 32))
    )
    n = len(data)
    return (int.from_bytes(data, "big") ^ int.from_bytes(blocks[:n], "big")).to_bytes(n, "big")


class Sealer:
    """Seals dict payloads into opaque, encrypted, authenticated, expiring tokens.

    ``key`` is raw bytes or a str in hex or urlsafe base64 (padding optional). ``None`` means
    :meth:`from_env` semantics: ``MCPKIT_STATE_KEY`` if set and non-empty, else a random 32-byte
    key for this process only; then ``ephemeral`` is True and tokens do not survive a restart nor
    open in another process, so a scaled-out server must set the variable.
    """

    def __init__(
        self,
        key: bytes | str | None = None,
        *,
        ttl: float = 600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if key is None:
            key = os.environ.get("MCPKIT_STATE_KEY") or None
        self.ephemeral = key is None
        master = secrets.token_bytes(32) if key is None else _parse_key(key)
        prk = hmac.digest(b"mcpkit/requestState", master, "sha256")
        self._enc = hmac.digest(prk, b"v1/enc\x01", "sha256")
        self._mac = hmac.digest(prk, b"v1/mac\x01", "sha256")
        self.ttl = self._check_ttl(ttl)
        self._clock = clock

    @classmethod
    def from_env(cls, var: str = "MCPKIT_STATE_KEY", **kw: Any) -> Sealer:
        """A Sealer keyed by ``os.environ[var]``, or by a random per-process key if it is unset/empty."""
        value = os.environ.get(var) or None
        if value is None:
            sealer = cls(secrets.token_bytes(32), **kw)
            sealer.ephemeral = True
            return sealer
        return cls(value, **kw)

    def __repr__(self) -> str:
        return f"Sealer(ttl={self.ttl!r}, ephemeral={self.ephemeral!r})"

    @staticmethod
    def _check_ttl(ttl: float) -> float:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
            raise ValueError("ttl must be a positive finite number of seconds")
        return float(ttl)

    def seal(self, payload: dict, *, bind: str, ttl: float | None = None) -> str:
        """An opaque token for ``payload`` that opens only with the same ``bind`` before expiry."""
        if not isinstance(payload, dict):
            raise TypeError("payload must be a dict")
        if not isinstance(bind, str):
            raise TypeError("bind must be a str")
        life = self.ttl if ttl is None else self._check_ttl(ttl)
        plain = _json.dumps({"aud": bind, "exp": self._clock() + life, "p": payload})
        nonce = secrets.token_bytes(_NONCE)
        body = _VERSION + nonce + _keystream_xor(self._enc, nonce, plain)
        raw = body + hmac.digest(self._mac, body, "sha256")
        token = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if len(token) > MAX_TOKEN_LENGTH:
            raise ValueError(f"sealed state exceeds {MAX_TOKEN_LENGTH} characters")
        return token

    def open(self, token: str, *, bind: str) -> dict:
        """The payload sealed in ``token``; StateError if it is malformed, forged, expired or foreign."""
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_LENGTH:
            raise StateError(MALFORMED)
        if not _B64.fullmatch(token) or len(token) % 4 == 1:
            raise StateError(MALFORMED)
        raw = _b64decode(token)  # cannot fail on the urlsafe alphabet with a valid length
        # Canonical form only: stray low bits in the last character would decode to the same bytes.
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != token or len(raw) < 50:
            raise StateError(MALFORMED)  # 50 = version + nonce + tag + at least one byte
        body, tag = raw[:-_TAG], raw[-_TAG:]
        if not hmac.compare_digest(hmac.digest(self._mac, body, "sha256"), tag):
            raise StateError(INTEGRITY)
        if body[:1] != _VERSION:  # unreachable unless the key holder sealed another version
            raise StateError(INTEGRITY)
        nonce = body[1 : 1 + _NONCE]
        try:
            state = _json.loads(_keystream_xor(self._enc, nonce, body[1 + _NONCE :]))
        except _json.JSONDecodeError:
            raise StateError(MALFORMED) from None
        if not isinstance(state, dict) or not isinstance(state.get("p"), dict):
            raise StateError(MALFORMED)
        aud, exp = state.get("aud"), state.get("exp")
        if not isinstance(aud, str) or not isinstance(exp, (int, float)):
            raise StateError(MALFORMED)
        wanted = bind.encode("utf-8", "surrogatepass") if isinstance(bind, str) else b"\xff"  # never UTF-8
        if not hmac.compare_digest(aud.encode(), wanted):
            raise StateError(MISMATCH)
        if self._clock() > exp:
            raise StateError(EXPIRED)
        return state["p"]
