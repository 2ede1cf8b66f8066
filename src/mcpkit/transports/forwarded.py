"""Who a request comes from behind a reverse proxy or balancer (``--forwarded-allow-ips``).

Behind a proxy every request's TCP peer is the proxy, so without this every client is one
address: one session quota, one anonymous rate-limit budget, one audit name (http_quotas.py).
The proxy names the client in ``X-Forwarded-For``; a header anybody can send, so it is read only
when the TCP peer is a trusted proxy, and then walked from the right past the trusted hops (each
proxy appends the address it saw): the first untrusted one is the client, so a value the client
forged to the left of what the proxies appended is never taken. ``X-Forwarded-Proto`` from a
trusted peer sets the scheme (a TLS-terminating proxy: the protected-resource URL says https).

This is uvicorn's own ``ProxyHeadersMiddleware``, applied by the app rather than by uvicorn, so
that the same rule holds under ``mcpkit serve``, ``--workers``, ``server.run("http")`` and an
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
    if not hosts:
        return app
    from .._extras import needs

    return ForwardedFor(app, hosts)


class ForwardedFor:
    """uvicorn's ProxyHeadersMiddleware around ``app``, which is still reached through it as
    through the CORS middleware (``app.sessions``, ``app.close_all()``...)."""

    def __init__(self, app: Any, hosts: list[str]) -> None:
        from .._extras import needs

        with needs("http", "forwarded_allow_ips"):
            from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        self.app = app
        self._headers = ProxyHeadersMiddleware(app, trusted_hosts=hosts)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self._headers(scope, receive, send)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)
