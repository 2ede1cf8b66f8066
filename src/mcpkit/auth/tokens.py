"""What a verified access token looks like to the rest of mcpkit, and what a verifier is.

An MCP server behind OAuth is a resource server: it receives ``Authorization: Bearer <token>``
on every request and must decide whether the token is valid *for this server* (AU-05, AU-07,
SEC-01). The verifiers (``static``, ``jwt``, ``introspection``) all turn a token string into an
:class:`AccessToken` or raise :class:`InvalidToken`; the HTTP layer turns the latter into a 401
with ``WWW-Authenticate: Bearer error="invalid_token"`` (AU-06).

This module stays import-light (no asyncio, no urllib at import time): the HTTP helpers shared by
the network verifiers import what they need when first called.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AccessToken",
    "InvalidToken",
    "TokenVerifier",
    "parse_scopes",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def parse_scopes(value: str | Iterable[str] | None) -> frozenset[str]:
    """Scopes from an RFC 6749 ``scope`` string ("a b c") or a list as in the ``scp`` claim.

    ``None`` gives the empty set. Anything else that is not a string or a list of strings raises
    ``TypeError``, so a malformed claim fails closed instead of granting odd scopes.
    """
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, (bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"scopes must be a space-separated string or a list of strings, not {type(value).__name__}")
    scopes: set[str] = set()
    for item in value:
        if not isinstance(item, str):
            raise TypeError(f"scope list items must be strings, not {type(item).__name__}")
        scopes.update(item.split())
    return frozenset(scopes)


def _required(required: Iterable[str] | str) -> frozenset[str]:
    # A single string is one scope string ("a b"), never a sequence of characters.
    return parse_scopes(required)


@dataclass(frozen=True, slots=True)
class AccessToken:
    """A token that passed verification: who, for which client, with which scopes, until when.

    The raw token string is never kept here (AU-14): a verified token is identified by its
    claims, and nothing downstream (logs, audit, upstream calls) can leak or pass it on (AU-07).
    ``claims`` is a read-only mapping of what the issuer said (JWT payload or introspection
    response); it is left out of ``repr`` to keep log lines short and free of personal data.
    """

    subject: str
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    audience: tuple[str, ...] = ()
    issuer: str | None = None
    claims: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.scopes, frozenset):
            object.__setattr__(self, "scopes", parse_scopes(self.scopes))
        if isinstance(self.audience, str):
            object.__setattr__(self, "audience", (self.audience,))
        elif not isinstance(self.audience, tuple):
            object.__setattr__(self, "audience", tuple(self.audience))
        if not isinstance(self.claims, MappingProxyType):
            object.__setattr__(self, "claims", MappingProxyType(dict(self.claims)))

    def has_scopes(self, required: Iterable[str] | str) -> bool:
        """True when every scope in ``required`` was granted (exact names, no hierarchy)."""
        return _required(required) <= self.scopes

    def missing_scopes(self, required: Iterable[str] | str) -> list[str]:
        """The scopes of ``required`` this token lacks, sorted (for one challenge, AU-10)."""
        return sorted(_required(required) - self.scopes)


def _sanitize(text: str, limit: int = 200) -> str:
    # Printable ASCII without '"' and '\\': safe inside a quoted-string of a WWW-Authenticate
    # header (RFC 6750 §3 restricts error_description to %x20-21 / %x23-5B / %x5D-7E).
    out = "".join(" " if c.isspace() else c if " " <= c <= "~" and c not in '"\\' else "?" for c in text)
    out = " ".join(out.split())
    return out[:limit] or "invalid token"


class InvalidToken(Exception):
    """The presented token is not acceptable (AU-06: answer 401 ``invalid_token``).

    ``description`` is short, human-readable and safe to put in
    ``WWW-Authenticate: Bearer error="invalid_token", error_description="..."``: it is sanitized
    here to printable ASCII without quotes or backslashes. Verifiers never put token bytes or key
    material into it.
    """

    error = "invalid_token"

    def __init__(self, description: str = "invalid token") -> None:
        self.description = _sanitize(str(description))
        super().__init__(self.description)


@runtime_checkable
class TokenVerifier(Protocol):
    """Turns a bearer token into an :class:`AccessToken`, or raises :class:`InvalidToken`.

    A verifier MUST check that the token was issued for *this* resource server (its audience,
    AU-05), not only that it is authentic: accepting a token minted for another service is token
    passthrough (SEC-01, AU-07). It must not log or keep the raw token (AU-14).
    """

    async def verify(self, token: str) -> AccessToken: ...


# ---------------------------------------------------------------------------------------------
# Shared plumbing for the verifiers that talk to an authorization server over HTTP.

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "127.0.0.1", "::1"})
MAX_RESPONSE_BYTES = 1 << 20


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    host = host.lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def audience_key(uri: str) -> str:
    """``uri`` for audience comparison: scheme and host lower-cased (RFC 3986 §6.2.2.1, AU-15).

    Everything else, trailing slash included, compares exactly (RFC 8707 canonical URIs).
    """
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(uri)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return uri
    if parts.scheme and parts.netloc:
        return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, parts.fragment))
    return uri


def check_endpoint_url(url: str, what: str) -> str:
    """``url`` when it is HTTPS, or plain HTTP to a loopback host; ``ValueError`` otherwise.

    Keys and introspection answers decide who gets in, so they are never fetched in clear text
    over a network (OAuth 2.1 §1.5 requires TLS towards the authorization server).
    """
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url:
        raise ValueError(f"{what} must be a non-empty URL")
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and is_loopback(parts.hostname):
        return url
    raise ValueError(f"{what} must be an https:// URL (plain http only to localhost), got {url!r}")


def http_request(
    url: str, *, data: bytes | None = None, headers: Mapping[str, str] | None = None, timeout: float,
    follow_redirects: bool = False,
) -> tuple[int, bytes]:
    """Blocking HTTP GET (or POST when ``data`` is given): ``(status, body)``; run it in a thread.

    Error statuses are returned, not raised; network failures raise ``OSError``. Redirects are
    followed only when asked and only to URLs :func:`check_endpoint_url` accepts. Loopback URLs
    never go through a proxy. Bodies above 1 MiB raise ``ValueError``.
    """
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    class _Redirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, hdrs, newurl):  # type: ignore[no-untyped-def]
            if not follow_redirects:
                return None
            check_endpoint_url(newurl, "redirect target")
            return super().redirect_request(req, fp, code, msg, hdrs, newurl)

    handlers: list[Any] = [_Redirects()]
    if is_loopback(urlsplit(url).hostname):
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
    request = urllib.request.Request(url, data=data, headers={"User-Agent": "mcpkit", **(headers or {})},
                                     method="POST" if data is not None else "GET")
    try:
        response = opener.open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:  # a status >= 400, or a redirect we refused
        with exc:
            return exc.code, exc.read(MAX_RESPONSE_BYTES)
    with response:
        body = response.read(MAX_RESPONSE_BYTES + 1)
        if len(body) > MAX_RESPONSE_BYTES:
            raise ValueError("response larger than 1 MiB")
        return response.status, body
