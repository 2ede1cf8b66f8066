"""What does not need the shared store never waits on it: a session held by this process is
served with no store call, its periodic renewal runs in the background (one at a time)
(transports/http_sessions.py), and an async tool's rate limit waits for Redis off the event
loop (policy/chain.py). With real processes and a slowed or paused Redis:
tests/scaleout/test_slow_store.py."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.stores.redis import from_url
from tests.reliability.test_hostile_transport import call, mcp_headers, open_session, ping, rpc

BOUND = 10.0  # a hang guard, never a performance bound


def process(url: str, name: str) -> Any:
    joint = "&" if "?" in url else "?"
    server = Server("offload", "1.0", stores=from_url(f"{url}{joint}prefix=offload:", origin=name))

    @server.tool(rate_limit="100/min")
    async def limited() -> str:
        return "ok"

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


@pytest.mark.asyncio
async def test_an_async_tools_rate_limit_waits_for_redis_off_the_event_loop(redis_url):
    app = process(redis_url, "a")
    rates = app.server.stores.rates
    gate = threading.Event()  # the bucket's script waits on it, as on a paused Redis
    arrived = threading.Event()
    real_take = rates.take

    def gated_take(*args: Any, **kwargs: Any) -> float:
        arrived.set()
        assert gate.wait(BOUND), "the test never opened the gate"
        return real_take(*args, **kwargs)

    try:
        session = await open_session(app)
        rates.take = gated_take
        limited = asyncio.ensure_future(call(app, body=rpc("tools/call", {"name": "limited", "arguments": {}}, 3),
                                             headers=mcp_headers(session)))
        assert await asyncio.to_thread(arrived.wait, BOUND)
        for _ in range(3):  # the loop serves the session meanwhile
            assert await asyncio.wait_for(ping(app, session), BOUND) == 200
        assert not limited.done()
        gate.set()
        answer = await asyncio.wait_for(limited, BOUND)
        assert answer.status == 200 and b'"text":"ok"' in answer.body, answer.body
    finally:
        gate.set()
        app.close_all()
        await app.server.stores.aclose()


@pytest.mark.asyncio
async def test_tasks_get_waits_for_the_task_store_off_the_event_loop(redis_url):
    from tests.scaleout.test_two_processes import MODERN, modern

    app = process(redis_url, "a")
    tasks = app.server.tasks.store
    gate = threading.Event()  # the task store's GET waits on it, as on a paused Redis
    arrived = threading.Event()
    real_get = tasks.get

    def gated_get(task_id: str) -> Any:
        arrived.set()
        assert gate.wait(BOUND), "the test never opened the gate"
        return real_get(task_id)

    try:
        session = await open_session(app)
        tasks.get = gated_get
        headers = [("content-type", "application/json"), ("accept", "application/json"),
                   ("mcp-protocol-version", MODERN), ("mcp-method", "tasks/get"), ("mcp-name", "nope")]
        polled = asyncio.ensure_future(call(app, body=modern("tasks/get", {"taskId": "nope"}, 4), headers=headers))
        assert await asyncio.to_thread(arrived.wait, BOUND)
        for _ in range(3):  # the loop serves the session meanwhile
            assert await asyncio.wait_for(ping(app, session), BOUND) == 200
        assert not polled.done()
        gate.set()
        answer = await asyncio.wait_for(polled, BOUND)
        assert b"Unknown task" in answer.body, answer.body  # -32602 (400 under 2026-07-28)
    finally:
        gate.set()
        app.close_all()
        await app.server.stores.aclose()
