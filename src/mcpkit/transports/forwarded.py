"""Who a request comes from behind a reverse proxy or balancer (``--forwarded-allow-ips``).

Behind a proxy every request's TCP peer is the proxy, so without this every client is one
address: one session quota, one anonymous rate-limit budget, one audit name (http_quotas.py).
The proxy names the client in ``X-Forwarded-For``; a header anybody can send, so it is read only
when the TCP peer is a trusted proxy, and then walked from the right past the trusted hops (each
proxy appends the address it saw): the first untrusted one is the client, so a value the client
forged to the left of what the proxies appended is never taken. ``X-Forwarded-Proto`` from a
trusted peer sets the scheme (a TLS-terminating proxy: the protected-resource URL says https).

This is the rule of uvicorn's ``ProxyHeadersMiddleware``, applied by the app rather than by
uvicorn (and read more strictly: :class:`ForwardedFor`), so that the same rule holds under ``mcpkit serve``, ``--workers``, ``server.run("http")`` and an
embedder's ASGI host, and so that uvicorn's defaults (trust 127.0.0.1 and ::1, or
``FORWARDED_ALLOW_IPS``) never apply: the default here is to trust no peer. A loopback default is
not safe: a balancer on the same machine makes every local process a trusted proxy that may name
any address. The middleware rewrites ``scope["client"]``, so every reader of the client's address
(quotas, rate limits, audit lines, the refusal-audit budget) sees the one derived address.

Headers only, not the PROXY protocol (HAProxy ``send-proxy``): uvicorn does not speak it, and
``X-Forwarded-For`` is what every HTTP proxy sends.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

__all__ = ["trusted_proxies", "behind_proxies", "ForwardedFor"]


def trusted_proxies(value: str | Iterable[str] | None) -> list[str]:
    """The trusted peers ``value`` names: addresses and networks (``10.0.0.0/8``), comma-separated
    or a list, or ``*`` (any peer: only when nothing but the proxy can reach the server). A
    ValueError of one line for an entry that is neither: uvicorn would take it as a literal
    name no peer ever has, and trust nobody without a word."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for raw in items:
        item = str(raw).strip()
        if not item:
            continue
        if item != "*":
            try:
                ipaddress.ip_network(item, strict=False) if "/" in item else ipaddress.ip_address(item)
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or network: give e.g. 10.0.0.5, 10.0.0.0/8 "
                                 "or * (any peer)") from None
        out.append(item)
    return ["*"] if "*" in out else out


def behind_proxies(app: Any, trusted: str | Iterable[str] | None) -> Any:
    """``app`` taking the client's address from ``X-Forwarded-For`` when the TCP peer is one of
    ``trusted`` (:func:`trusted_proxies`); ``app`` itself when none is trusted."""
    hosts = trusted_proxies(trusted)
    return ForwardedFor(app, hosts) if hosts else app


class ForwardedFor:
    """``app`` with ``scope["client"]`` (and the scheme) taken from the trusted proxies' headers;
    ``app`` is still reached through it as through the CORS middleware (``app.sessions``,
    ``app.close_all()``...).

    Not uvicorn's ProxyHeadersMiddleware, whose rule this was first: trusting ``*`` it takes the
    leftmost X-Forwarded-For entry, which is the client's own text when a proxy appends to what
    the client sent (nginx's ``$proxy_add_x_forwarded_for``), and it takes an entry that is no
    address at all as one, so a client could name itself anything and get as many session
    quotas, rate budgets and audit names as it liked. Here ``*`` trusts the peer as one proxy
    (the rightmost entry, the address it saw), several X-Forwarded-For fields are one list in
    their order (RFC 9110 section 5.3), and a list with an entry that is not an address is not
    read at all: the peer stays the client."""

    def __init__(self, app: Any, hosts: list[str]) -> None:
        self.app = app
        self._any = hosts == ["*"]
        self._networks = [ipaddress.ip_network(h, strict=False) for h in hosts if h != "*"]

    def _trusted(self, host: str) -> bool:
        if self._any:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self._networks)

    def _client(self, hops: list[str]) -> str | None:
        """The client among the X-Forwarded-For entries: walking from the right (each proxy
        appends the address it saw), the first that is not a trusted proxy; None when the list
        cannot be read."""
        for host in reversed(hops):
            try:
                ipaddress.ip_address(host)
            except ValueError:
                return None
            if self._any or not self._trusted(host):
                return host
        return hops[0] if hops else None  # every hop a trusted proxy: the first one asked

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        peer = scope.get("client")
        if scope["type"] in ("http", "websocket") and peer and self._trusted(peer[0]):
            hops: list[str] = []
            proto = None
            for name, value in scope["headers"]:
                if name == b"x-forwarded-for":
                    hops += [hop.strip() for hop in value.decode("latin-1").split(",")]
                elif name == b"x-forwarded-proto":
                    proto = value.decode("latin-1").strip().lower()
            host = self._client(hops)
            if host is not None or proto in ("http", "https"):
                scope = dict(scope)
                if host is not None:
                    scope["client"] = (host, 0)
                if proto in ("http", "https"):
                    scope["scheme"] = proto if scope["type"] == "http" else {"http": "ws", "https": "wss"}[proto]
        await self.app(scope, receive, send)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)
