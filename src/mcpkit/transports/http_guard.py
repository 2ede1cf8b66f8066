"""Who may talk to the HTTP app at all: the Host and Origin allow-lists (HS-01, HS-02).

Two lists, two jobs. The Host list defends against DNS rebinding: a page of evil.example that
got its name re-pointed at 127.0.0.1 still sends ``Host: evil.example``. The Origin list
defends against cross-site requests from a browser: a page of one site calling a server of
another. Both default to loopback. ``'*'`` in the Host list turns the Host check off (a server
behind a proxy that rewrites Host); it never turns the Origin check off, so a foreign Origin,
and the opaque ``null`` Origin of sandboxed frames and file pages, get 403 whatever the Host
list says. An Origin is served when it is listed in ``allowed_origins`` (``'*'`` there accepts
any), when it is a loopback origin, or when its host is one the Host list names explicitly
(the server's own pages: same origin).

Headers that say one thing must say it once: a request carrying two Origin (or Host,
Authorization, session, version, Content-Type...) headers is refused with 400 rather than
letting one copy win, since another hop may have read the other one.
"""

from __future__ import annotations

__all__ = ["LOOPBACK_HOSTS", "HostGuard", "repeated_header"]

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})

#: headers with one value each (RFC 9110 §5.3: a list is allowed only where the field says so)
_SINGLE = frozenset({
    b"host", b"origin", b"authorization", b"content-type", b"content-length", b"mcp-session-id",
    b"mcp-protocol-version", b"last-event-id", b"mcp-method", b"mcp-name",
})


def repeated_header(raw: list[tuple[bytes, bytes]], parsed: dict[bytes, bytes],
                    also: bytes | None = None) -> str | None:
    """The name of a single-valued header sent more than once, else None. ``parsed`` is
    ``dict(raw)``: when no name repeats they are the same length, and nothing more is done.
    ``also``: one more such header, the credential header an API-key scheme reads (two keys
    would leave which one is checked to the order of the parse)."""
    if len(parsed) == len(raw):
        return None
    seen: set[bytes] = set()
    for name, _value in raw:
        if name in _SINGLE or name == also:
            if name in seen:
                return name.decode("latin-1")
            seen.add(name)
    return None


def hostname(value: str) -> str:
    """'example.com:8080' -> 'example.com'; '[::1]:3000' -> '::1'."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class HostGuard:
    """The allow-lists of one app; :meth:`refusal` says why a request may not be served."""

    def __init__(self, allowed_hosts: list[str] | None, allowed_origins: list[str] | None) -> None:
        listed = {h.lower() for h in (allowed_hosts or ())}
        self.any_host = "*" in listed
        #: hosts named explicitly (never '*'), plus loopback
        self.hosts = (listed - {"*"}) | set(LOOPBACK_HOSTS)
        origins = {o.rstrip("/").lower() for o in (allowed_origins or ())}
        self.any_origin = "*" in origins
        self.origins = origins - {"*"}
        # verdicts by raw header value: a client sends the same Host and Origin every time, so
        # the common case is one dict lookup (bounded: odd values sent on purpose cannot grow it)
        self._hosts_seen: dict[bytes, bool] = {}
        self._origins_seen: dict[bytes, bool] = {}

    def host_allowed(self, host: str) -> bool:
        return self.any_host or self.host_named(host)

    def host_named(self, host: str) -> bool:
        """``host`` is loopback or named in the allow-list: not merely let in by ``'*'``. Only
        such a Host may be written into a response a shared cache keeps (anyone can send any
        other, and the cache would hand their URL to everyone)."""
        return host.lower() in self.hosts or hostname(host) in self.hosts

    def origin_allowed(self, origin: str) -> bool:
        if self.any_origin or origin in self.origins:
            return True
        scheme, sep, authority = origin.partition("://")
        if not sep or scheme not in ("http", "https") or not authority or "/" in authority or "@" in authority:
            return False  # 'null', file:, or no origin at all (RFC 6454 §7.1: scheme://host[:port])
        return authority in self.hosts or hostname(authority) in self.hosts

    def refusal(self, headers: dict[bytes, bytes]) -> str | None:
        """HS-01/HS-02: why this request's Host or Origin may not be served (None: it may)."""
        raw = headers.get(b"host", b"")
        ok = self._hosts_seen.get(raw)
        if ok is None:
            ok = _remember(self._hosts_seen, raw, self.host_allowed(raw.decode("latin-1")))
        if not ok:
            return f"Host {raw.decode('latin-1')!r} is not allowed; configure allowed_hosts to serve it."
        origin = headers.get(b"origin")
        if origin is not None:
            text = origin.decode("latin-1").strip().rstrip("/").lower()
            ok = self._origins_seen.get(origin)
            if ok is None:
                ok = _remember(self._origins_seen, origin, self.origin_allowed(text))
            if not ok:
                return f"Origin {text!r} is not allowed; configure allowed_origins to serve it."
        return None


def _remember(seen: dict[bytes, bool], raw: bytes, verdict: bool) -> bool:
    if len(seen) >= 256:
        seen.clear()
    seen[raw] = verdict
    return verdict
