"""Session quotas of the HTTP app: one client's flood never ends another client's session.

Sessions are capped twice: ``max_sessions`` in all, and ``max_sessions_per_client`` for each
client, a client being the authenticated principal or, without auth, the client's address (an
IPv6 address by its /64 network; behind a proxy, the address its ``X-Forwarded-For`` names when
the proxy is trusted with ``--forwarded-allow-ips``: transports/forwarded.py). A new session
past a cap makes room like this (HL-17 lets a server end a session at any time; its client gets
404 and initializes again):

- past the client's own quota: its own least recently used idle session ends; when all of its
  sessions have a connection open, the new one is refused with 429 and ``Retry-After``;
- past ``max_sessions``: the least recently used idle session of the client holding the most
  sessions ends (the flooder's, never a light user's while a heavier one has an idle session);
  when no session at all is idle, the new one is refused with 503 and ``Retry-After``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["SessionQuotas", "QuotaExceeded", "client_address", "peer_address"]


def client_address(scope: dict[str, Any]) -> str:
    """Who a request without auth comes from, as quotas, rate limits and audit budgets count
    it: its IPv4 address, or the /64 network of its IPv6 address (one host is commonly given a
    whole /64, and could otherwise be a new client at every address in it)."""
    client = scope.get("client")
    if not client:
        return "unknown"
    host = str(client[0])
    return _ipv6_network(host) if ":" in host else host


def peer_address(scope: dict[str, Any]) -> str:
    """The request's own address (an IPv4-mapped IPv6 one as IPv4): how an anonymous caller is
    named in audit lines and ``ctx.principal``, where a /64 would lump distinct hosts together.
    Budgets still count an IPv6 caller by its /64 (:func:`client_address`)."""
    client = scope.get("client")
    if not client:
        return "unknown"
    host = str(client[0])
    if host.startswith("::ffff:"):
        mapped = _ipv6_network(host)
        return mapped if "/" not in mapped else host
    return host


@functools.lru_cache(maxsize=4096)
def _ipv6_network(host: str) -> str:
    import ipaddress

    try:
        address = ipaddress.IPv6Address(host)
    except ValueError:
        return host  # not an address (a transport's own name for its peer): itself
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return f"{ipaddress.IPv6Network((address, 64), strict=False).network_address}/64"


class QuotaExceeded(Exception):
    """No room for a new session: answer ``status`` with ``Retry-After: retry_after``."""

    def __init__(self, status: int, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


class SessionQuotas:
    """Which client holds which sessions, and which session ends to make room."""

    def __init__(self, per_client: int, retry_after: int = 5) -> None:
        if per_client < 1:
            raise ValueError("max_sessions_per_client must be a positive integer")
        self.per_client = per_client
        self.retry_after = retry_after
        self._by_client: dict[str, dict[str, None]] = {}  # client -> its session ids, oldest first
        self._client_of: dict[str, str] = {}

    def count(self, client: str) -> int:
        return len(self._by_client.get(client, ()))

    def add(self, client: str, session_id: str) -> None:
        self._by_client.setdefault(client, {})[session_id] = None
        self._client_of[session_id] = client

    def remove(self, session_id: str) -> None:
        client = self._client_of.pop(session_id, None)
        if client is None:
            return
        mine = self._by_client.get(client)
        if mine is not None:
            mine.pop(session_id, None)
            if not mine:
                del self._by_client[client]

    def own_victim(self, client: str, idle: Callable[[str], bool], last_seen: Callable[[str], float]) -> str | None:
        """At the client's quota: its least recently used idle session to end (None: keep them);
        raises QuotaExceeded when every one of them is busy."""
        mine = self._by_client.get(client)
        if mine is None or len(mine) < self.per_client:
            return None
        candidates = [sid for sid in mine if idle(sid)]
        if not candidates:
            raise QuotaExceeded(
                429, f"Too many sessions for this client (the limit is {self.per_client}, all in use); "
                     "end one (DELETE) or retry later.", self.retry_after)
        return min(candidates, key=last_seen)

    def global_victim(self, sessions_lru: Iterable[tuple[str, Any]], idle: Callable[[Any], bool]) -> str:
        """At ``max_sessions``: the least recently used idle session among the clients holding the
        most sessions, then among lighter clients; raises QuotaExceeded when none is idle."""
        by_weight: dict[int, str] = {}
        for sid, hs in sessions_lru:  # least recently used first
            if not idle(hs):
                continue
            weight = self.count(self._client_of.get(sid, ""))
            by_weight.setdefault(weight, sid)
        if not by_weight:
            raise QuotaExceeded(503, "The server holds as many sessions as it may, all in use; retry later.",
                                self.retry_after)
        return by_weight[max(by_weight)]
