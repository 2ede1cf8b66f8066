"""Per-client session quotas with shared sessions: a client flooding several processes is counted
once, across all of them; its own oldest sessions end everywhere, another client's never do."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Server
from mcpkit.stores.redis import from_url
from tests.reliability.test_hostile_transport import call, initialize, mcp_headers, open_session, ping


def process(redis_url: str, prefix: str, name: str, **options: Any) -> Any:
    """One server process's app, sharing sessions through Redis under ``prefix``."""
    joined = f"{redis_url}{'&' if '?' in redis_url else '?'}prefix={prefix}"
    server = Server("quota", "1.0", stores=from_url(joined, origin=name))
    return server.http_app(json_response=True, **options)


@pytest.mark.asyncio
async def test_a_flood_over_two_processes_counts_once_and_ends_only_the_flooders_sessions(redis_url, prefix, rclient):
    a = process(redis_url, prefix, "a", max_sessions_per_client=5)
    b = process(redis_url, prefix, "b", max_sessions_per_client=5)
    try:
        victim = await open_session(a, client="10.0.0.1")
        flood = []
        for n in range(16):  # alternating processes: each sees only half of the flood
            answer = await call(a if n % 2 else b, body=initialize(), headers=mcp_headers(), client="10.0.0.66")
            assert answer.status == 200
            flood.append(answer.headers["mcp-session-id"])
        stored = {k.decode() for k in rclient.scan_iter(match=f"{prefix}session:*")}
        store = a.session_store
        alive = [sid for sid in flood if store.key(sid) in stored]
        assert alive == flood[-5:], (len(alive), alive)  # the quota held across both processes
        assert rclient.zcard(store.client_key("address:10.0.0.66")) == 5
        # the victim's session lives on, in either process
        assert await ping(a, victim, client="10.0.0.1") == 200
        assert await ping(b, victim, client="10.0.0.1") == 200
        # ending a session frees its place in the quota
        answer = await call(a, "DELETE", headers=mcp_headers(victim), client="10.0.0.1")
        assert answer.status == 200
        assert rclient.zcard(store.client_key("address:10.0.0.1")) == 0
    finally:
        for app in (a, b):
            app.close_all()
            await app.server.stores.aclose()
