"""Shared sessions end once and for all: a process that has not heard of an end yet cannot bring
the session back by saving a change to it (the other rules, with real processes and a Redis
stopped mid-test, are in tests/scaleout/test_store_outage.py)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Server
from mcpkit.stores.redis import from_url
from tests.reliability.test_hostile_transport import call, mcp_headers, open_session, ping, rpc


def process(url: str, name: str) -> Any:
    """One server process's app, sharing sessions through ``url``."""
    server = Server("ends", "1.0", stores=from_url(f"{url}?prefix=ends:", origin=name))
    return server.http_app(json_response=True)


@pytest.mark.req("HL-17")
@pytest.mark.asyncio
async def test_a_change_saved_by_a_process_that_missed_the_end_does_not_bring_the_session_back(redis_process):
    import redis

    a, b = process(redis_process.url, "a"), process(redis_process.url, "b")
    raw = redis.Redis.from_url(redis_process.url)
    try:
        session = await open_session(a)
        assert await ping(b, session) == 200  # B holds a copy
        key = a.session_store.key(session)
        raw.delete(key)  # ended in the store, and B has not heard of it (no news on the bus)
        changed = await call(b, body=rpc("logging/setLevel", {"level": "debug"}, 9), headers=mcp_headers(session))
        assert changed.status == 200
        assert raw.exists(key) == 0  # the change was not saved as a new record
        assert await ping(b, session) == 404  # and B dropped its copy
    finally:
        raw.close()
        for app in (a, b):
            app.close_all()
            await app.server.stores.aclose()
