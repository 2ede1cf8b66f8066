"""Notifications across two `mcpkit serve --http` processes after their Redis restarted: with
persistence every session lives on and its subscriptions still hear what the other process
publishes; without, every old session is gone (404) on both, and a client that starts over
hears what is published from then on, whichever process publishes it and whichever serves it.

Each test runs a redis-server of its own (tests/scaleout/test_store_outage.py's ``redis_factory``),
stopped and started again on the same port. Every wait is bounded.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.scaleout.test_store_outage import (BUS_BACK, DEADLINE, ended, joined, listening, processes,
                                               redis_factory, status, stderr_of, until)

__all__ = ["redis_factory"]  # a fixture, used by name

pytestmark = pytest.mark.reliability

UPDATED = "notifications/resources/updated"
TOOLS_CHANGED = "notifications/tools/list_changed"
SESSIONS = 16


async def notified(client: Any, stream: Any, method: str, params: dict[str, Any] | None = None,
                   within: float = DEADLINE, *, id_stored: bool = True) -> None:
    """Read ``stream`` until it carries the notification ``method`` (with ``params``, if given),
    stored in the event store unless ``id_stored`` is false (it has an event id: a client that
    reconnects may resume after it)."""
    deadline = time.monotonic() + within
    unstored = 0  # e.g. the "may have changed" a process sends once its bus is back, before its event store is
    while True:
        left = deadline - time.monotonic()
        assert left > 0, (f"no {method} {params or ''} on the stream within {within} s"
                          + (f" ({unstored} sent without an event id: the event store did not take them)" if unstored else ""))
        event = await stream.next_event(timeout=left)
        assert event is not None, f"the stream ended before {method}"
        message = client.event_message(event)
        if message and message.get("method") == method and (params is None or message.get("params") == params):
            if event.id or not id_stored:
                return
            unstored += 1


@pytest.mark.req("HL-17")
@pytest.mark.asyncio
async def test_after_a_restart_with_persistence_what_one_process_publishes_reaches_the_other(redis_factory, clients):
    redis = redis_factory(True)
    with processes(redis) as [(proc_a, port_a), (proc_b, port_b)]:
        # sessions as the report had them (16): subscribed and listening on B, opened on A or B;
        # and the same on A
        on_b = [await listening(clients, port_b, port) for port in (port_a, port_b) * (SESSIONS // 4)]
        on_a = [await listening(clients, port_a, port) for port in (port_a, port_b) * (SESSIONS // 4)]
        publisher_a, publisher_b = clients.tcp(port_a), clients.tcp(port_b)
        await publisher_a.initialize()
        await publisher_b.initialize()

        redis.stop()
        redis.start()
        await until(lambda: all(BUS_BACK in stderr_of(p) for p in (proc_a, proc_b)), "both buses reconnect")

        assert await publisher_a.tool("touch", {"uri": "note://shared"})
        for _, client, stream in on_b:
            await notified(client, stream, UPDATED, {"uri": "note://shared"})
        assert await publisher_b.tool("touch", {"uri": "note://shared"})
        for _, client, stream in on_a:
            await notified(client, stream, UPDATED, {"uri": "note://shared"})
        assert await publisher_a.tool("grow", {"name": "restarted"})
        for _, client, stream in on_a + on_b:
            await notified(client, stream, TOOLS_CHANGED)


@pytest.mark.req("HL-17")
@pytest.mark.asyncio
async def test_after_a_restart_without_persistence_a_client_that_starts_over_hears_everything(redis_factory, clients):
    redis = redis_factory(False)
    with processes(redis) as [(proc_a, port_a), (proc_b, port_b)]:
        old = [await listening(clients, listener, opener)
               for listener in (port_a, port_b) for opener in (port_a, port_b) * (SESSIONS // 4)]

        redis.stop()
        redis.start()
        await until(lambda: all(BUS_BACK in stderr_of(p) for p in (proc_a, proc_b)), "both buses reconnect")
        for opener, client, stream in old:  # gone everywhere: the streams end, every process says 404
            await ended(stream)
            for port in (port_a, port_b):
                assert await status(joined(clients, port, opener)) == 404

        # the clients start over: new sessions, subscribed again, listening on either process
        _, on_b, stream_b = await listening(clients, port_b, port_a)
        _, on_a, stream_a = await listening(clients, port_a, port_b)
        publisher = clients.tcp(port_a)
        await publisher.initialize()
        for port in (port_a, port_b):
            assert await joined(clients, port, publisher).tool("touch", {"uri": "note://shared"})
            await notified(on_b, stream_b, UPDATED, {"uri": "note://shared"})
            await notified(on_a, stream_a, UPDATED, {"uri": "note://shared"})
        assert await joined(clients, port_b, publisher).tool("grow", {"name": "anew"})
        await notified(on_b, stream_b, TOOLS_CHANGED)
        await notified(on_a, stream_a, TOOLS_CHANGED)


@pytest.mark.req("HL-17")
@pytest.mark.asyncio
async def test_a_subscription_the_restart_lost_is_saved_again_from_the_copies(redis_factory, clients, tmp_path):
    """AOF fsynced every second: a host that crashes loses up to the last second of writes. Here
    the subscription made last is lost (the append-only file is put back as it was before it):
    the processes that hold the session's copy know better than the store and save it again, so
    the client, told its subscription was made, hears the updates."""
    redis = redis_factory(True)
    with processes(redis) as [(proc_a, port_a), (proc_b, port_b)]:
        opener = clients.tcp(port_a)
        await opener.initialize()
        on_b = joined(clients, port_b, opener)
        stream = await on_b.get()
        assert stream.status == 200
        assert (await on_b.tool("add", {"a": 1, "b": 1}))["structuredContent"] == {"result": 2}
        before = tmp_path / "before"
        shutil.copytree(Path(redis.aof_dir) / "appendonlydir", before)  # the session, not subscribed yet
        await on_b.result("resources/subscribe", {"uri": "note://shared"})

        redis.stop()
        shutil.rmtree(Path(redis.aof_dir) / "appendonlydir")
        shutil.copytree(before, Path(redis.aof_dir) / "appendonlydir")
        redis.start()
        await until(lambda: all(BUS_BACK in stderr_of(p) for p in (proc_a, proc_b)), "both buses reconnect")

        publisher = clients.tcp(port_a)
        await publisher.initialize()
        assert await publisher.tool("touch", {"uri": "note://shared"})
        await notified(on_b, stream, UPDATED, {"uri": "note://shared"})
        for port in (port_a, port_b):
            assert await status(joined(clients, port, opener)) == 200


@pytest.mark.asyncio
async def test_an_update_delivered_while_redis_is_down_says_so_in_one_line(redis_factory, clients):
    """B holds a copy of a session subscribed elsewhere: delivering an update re-reads its
    subscriptions from the store, which is down. That is an outage, logged as one line, not a
    traceback (``processes`` fails on one)."""
    redis = redis_factory(False)
    with processes(redis) as [(_, port_a), (proc_b, port_b)]:
        _, on_b, stream = await listening(clients, port_b, port_a, by_opener=True)
        redis.stop()
        assert await on_b.tool("touch", {"uri": "note://shared"})  # a held copy is served; its update delivered
        await notified(on_b, stream, UPDATED, {"uri": "note://shared"}, id_stored=False)
        assert "could not refresh a shared session's subscriptions" in stderr_of(proc_b)
