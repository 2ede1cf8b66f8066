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


class Gated:
    """A store method that waits until ``gate`` is open, as on a paused Redis; ``arrived`` is
    set once a call reached it, ``left`` once one returned, ``calls`` lists their first arguments."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.gate = threading.Event()
        self.arrived = threading.Event()
        self.left = threading.Event()
        self.calls: list[Any] = []

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args[0])
        self.arrived.set()
        try:
            assert self.gate.wait(BOUND), "the test never opened the gate"
            return self.real(*args)
        finally:
            self.left.set()


async def served_meanwhile(app: Any, session: str, request: Any, gated: Gated) -> Any:
    """``request`` (a coroutine) reaches the gated store method; the loop serves ``session``
    while it waits there; then the gate opens and its answer comes."""
    pending = asyncio.ensure_future(request)
    try:
        assert await asyncio.to_thread(gated.arrived.wait, BOUND)
        for _ in range(3):
            assert await asyncio.wait_for(ping(app, session), BOUND) == 200
        assert not pending.done()
    finally:
        gated.gate.set()
    return await asyncio.wait_for(pending, BOUND)


def process(url: str, name: str) -> Any:
    joint = "&" if "?" in url else "?"
    server = Server("offload", "1.0", stores=from_url(f"{url}{joint}prefix=offload:", origin=name))

    @server.tool(rate_limit="100/min")
    async def limited() -> str:
        return "ok"

    @server.tool
    async def announce() -> str:
        server.notify_resource_updated("note://x")  # on the event loop
        return "announced"

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
    touch = Gated(store.touch)
    try:
        session = await open_session(app)
        store.touch = touch
        app._touch_every = 0.0  # every request finds its renewal due
        assert await asyncio.wait_for(ping(app, session), BOUND) == 200  # the renewal due starts
        assert await asyncio.to_thread(touch.arrived.wait, BOUND)
        for _ in range(5):  # answered while the renewal waits on the store
            assert await asyncio.wait_for(ping(app, session), BOUND) == 200
        assert touch.calls == [session] and list(app._touching) == [session]
        store.delete(session)  # ended elsewhere, news unheard: the renewal finds it gone
        touch.gate.set()
        pending = app._touching.get(session)
        assert pending is not None
        await asyncio.wait_for(pending, BOUND)
        assert session not in app.sessions  # the copy is dropped, as a False touch always did
        assert await ping(app, session) == 404
    finally:
        touch.gate.set()
        app.close_all()
        await app.server.stores.aclose()


def _limited_call(session: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    return rpc("tools/call", {"name": "limited", "arguments": {}}, 3), mcp_headers(session)


def _tasks_get(session: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    from tests.scaleout.test_two_processes import MODERN, modern

    return modern("tasks/get", {"taskId": "nope"}, 4), [
        ("content-type", "application/json"), ("accept", "application/json"),
        ("mcp-protocol-version", MODERN), ("mcp-method", "tasks/get"), ("mcp-name", "nope")]


@pytest.mark.asyncio
@pytest.mark.parametrize(("store", "method", "request_of", "answered"), [
    ("rates", "take", _limited_call, b'"text":"ok"'),  # an async tool's rate limit (policy/chain.py)
    ("tasks", "get", _tasks_get, b"Unknown task"),  # -32602 (400 under 2026-07-28)
], ids=["async-tool-rate-limit", "tasks-get"])
async def test_a_request_that_needs_redis_waits_for_it_off_the_event_loop(redis_url, store, method, request_of,
                                                                          answered):
    app = process(redis_url, "a")
    target = app.server.stores.rates if store == "rates" else app.server.tasks.store
    gated = Gated(getattr(target, method))
    try:
        session = await open_session(app)
        setattr(target, method, gated)
        body, headers = request_of(session)
        answer = await served_meanwhile(app, session, call(app, body=body, headers=headers), gated)
        assert answered in answer.body, answer.body
    finally:
        gated.gate.set()
        app.close_all()
        await app.server.stores.aclose()


@pytest.mark.asyncio
async def test_an_update_announced_on_the_event_loop_reads_the_shared_sessions_off_it(redis_url):
    a, b = process(redis_url, "a"), process(redis_url, "b")
    load = Gated(b.session_store.load)
    try:
        session = await open_session(a)
        assert await ping(b, session) == 200  # B restores a copy, refreshed before each update
        b.session_store.load = load
        told = call(b, body=rpc("tools/call", {"name": "announce", "arguments": {}}, 5), headers=mcp_headers(session))
        answer = await asyncio.wait_for(told, BOUND)
        assert b"announced" in answer.body, answer.body
        assert await asyncio.to_thread(load.arrived.wait, BOUND)  # the refresh runs, on a store thread
        assert await asyncio.wait_for(ping(b, session), BOUND) == 200
        assert not load.left.is_set()  # ... and everything above was answered while it waited
    finally:
        load.gate.set()
        for app in (a, b):
            app.close_all()
            await app.server.stores.aclose()
