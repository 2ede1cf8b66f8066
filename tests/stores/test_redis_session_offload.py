"""A session held by this process is served without waiting on the shared store: its periodic
renewal runs in the background (one at a time), and the fast path makes no store call at all
(transports/http_sessions.py). With real processes and a slowed or paused Redis:
tests/scaleout/test_slow_store.py."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.stores.redis import from_url
from tests.reliability.test_hostile_transport import open_session, ping

BOUND = 10.0  # a hang guard, never a performance bound


def process(url: str, name: str) -> Any:
    joint = "&" if "?" in url else "?"
    server = Server("offload", "1.0", stores=from_url(f"{url}{joint}prefix=offload:", origin=name))
    return server.http_app(json_response=True)


@pytest.mark.asyncio
async def test_a_held_session_makes_no_store_call_until_its_renewal_is_due(redis_url):
    app = process(redis_url, "a")
    stores = app.server.stores
    calls: list[Any] = []
    real = stores.call

    async def counted(fn: Any, *args: Any) -> Any:
        calls.append(fn)
        return await real(fn, *args)

    try:
        session = await open_session(app)
        stores.call = counted
        for _ in range(20):
            assert await ping(app, session) == 200
        assert calls == []  # no executor hop, no store call: the copy is held and touched recently
    finally:
        app.close_all()
        await stores.aclose()


@pytest.mark.asyncio
async def test_a_due_renewal_runs_in_the_background_one_at_a_time(redis_url):
    app = process(redis_url, "a")
    store = app.session_store
    gate = threading.Event()  # the store's TOUCH waits on it, as on a paused Redis
    touches: list[str] = []
    arrived = threading.Event()
    real_touch = store.touch

    def gated_touch(session_id: str, ttl: float) -> bool:
        touches.append(session_id)
        arrived.set()
        assert gate.wait(BOUND), "the test never opened the gate"
        return real_touch(session_id, ttl)

    try:
        session = await open_session(app)
        store.touch = gated_touch
        app._touch_every = 0.0  # every request finds its renewal due
        assert await asyncio.wait_for(ping(app, session), BOUND) == 200  # the renewal due starts
        assert await asyncio.to_thread(arrived.wait, BOUND)
        for _ in range(5):  # answered while the renewal waits on the store
            assert await asyncio.wait_for(ping(app, session), BOUND) == 200
        assert touches == [session] and list(app._touching) == [session]  # one renewal in flight, not one per request
        store.delete(session)  # ended elsewhere, news unheard: the renewal finds it gone
        gate.set()
        pending = app._touching.get(session)
        assert pending is not None
        await asyncio.wait_for(pending, BOUND)
        assert session not in app.sessions  # the copy is dropped, as a False touch always did
        assert await ping(app, session) == 404
    finally:
        gate.set()
        app.close_all()
        await app.server.stores.aclose()
