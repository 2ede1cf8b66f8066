"""The notification bus: Redis pub/sub between processes, and the in-process MemoryBus."""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

import pytest

from mcpkit.stores.redis import MemoryBus, RedisBus


@pytest.fixture
def buses(redis_url: str, prefix: str):
    made: list[RedisBus] = []

    def make(origin: str, url: str = redis_url) -> RedisBus:
        bus = RedisBus(url, prefix=prefix, origin=origin)
        made.append(bus)
        return bus

    yield make
    for bus in made:
        bus.close()


def drain(q: queue.Queue[Any], timeout: float = 0.0) -> list[Any]:
    out = []
    try:
        out.append(q.get(timeout=timeout) if timeout else q.get_nowait())
        while True:
            out.append(q.get_nowait())
    except queue.Empty:
        return out


def test_a_message_published_by_one_process_reaches_another(buses) -> None:
    a, b = buses("proc-a"), buses("proc-b")
    got: queue.Queue[Any] = queue.Queue()
    threads: list[str] = []

    def on_message(message: dict[str, Any]) -> None:
        threads.append(threading.current_thread().name)
        got.put(message)

    b.subscribe("tools/list_changed", on_message)
    a.publish("tools/list_changed", {"server": "demo", "n": 1})
    assert got.get(timeout=5) == {"server": "demo", "n": 1, "origin": "proc-a"}
    assert threads == ["mcpkit-redis-bus"]  # on the bus's listener thread
    assert a.origin == "proc-a" and b.origin == "proc-b"


def test_own_messages_are_not_echoed_unless_asked_for(buses) -> None:
    a, b = buses("proc-a"), buses("proc-b")
    mine: queue.Queue[Any] = queue.Queue()
    everything: queue.Queue[Any] = queue.Queue()
    a.subscribe("ch", mine.put)
    a.subscribe("ch", everything.put, include_own=True)
    a.publish("ch", {"n": 1})
    b.publish("ch", {"n": 2})
    # each process's publisher thread sends its own messages in order; two processes' may cross
    assert sorted(m["n"] for m in (everything.get(timeout=5), everything.get(timeout=5))) == [1, 2]
    assert drain(mine, timeout=1) == [{"n": 2, "origin": "proc-b"}]  # b's only


def test_unsubscribe_stops_delivery(buses) -> None:
    a, b = buses("proc-a"), buses("proc-b")
    first: queue.Queue[Any] = queue.Queue()
    second: queue.Queue[Any] = queue.Queue()
    stop = b.subscribe("ch", first.put)
    b.subscribe("ch", second.put)
    a.publish("ch", {"n": 1})
    assert second.get(timeout=5)["n"] == 1
    stop()
    stop()  # twice is harmless
    a.publish("ch", {"n": 2})
    assert second.get(timeout=5)["n"] == 2
    assert [m["n"] for m in drain(first)] == [1]

    other = b.subscribe("elsewhere", first.put)  # a channel of its own, subscribed and dropped
    other()
    stop_again = b.subscribe("elsewhere", first.put)  # and again: confirmed again
    a.publish("elsewhere", {"n": 3})
    assert first.get(timeout=5)["n"] == 3
    stop_again()


def test_a_failing_callback_is_logged_and_the_listener_goes_on(buses, caplog) -> None:
    a, b = buses("proc-a"), buses("proc-b")
    got: queue.Queue[Any] = queue.Queue()

    def broken(message: dict[str, Any]) -> None:
        raise RuntimeError("callback bug")

    b.subscribe("ch", broken)
    b.subscribe("ch", got.put)
    with caplog.at_level(logging.ERROR, logger="mcpkit.stores.bus"):
        a.publish("ch", {"n": 1})
        a.publish("ch", {"n": 2})
        assert [got.get(timeout=5)["n"], got.get(timeout=5)["n"]] == [1, 2]
    assert any("callback" in r.getMessage() and r.exc_info for r in caplog.records)


def test_messages_are_json_objects_without_an_origin_of_their_own(buses) -> None:
    a = buses("proc-a")
    with pytest.raises(ValueError, match="origin"):
        a.publish("ch", {"origin": "forged"})
    with pytest.raises(TypeError, match="dict"):
        a.publish("ch", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        a.publish("ch", {"x": object()})


def test_the_bus_comes_back_after_a_redis_restart(redis_process, caplog) -> None:
    url = redis_process.url
    # tries a message Redis cannot take again for half a second only, then drops it
    a = RedisBus(url, prefix="restart:", origin="proc-a", retry_for=0.5)
    b = RedisBus(url, prefix="restart:", origin="proc-b")
    got: queue.Queue[Any] = queue.Queue()
    try:
        with caplog.at_level(logging.WARNING, logger="mcpkit.stores.bus"):
            b.subscribe("ch", got.put)
            a.publish("ch", {"n": 1})
            assert got.get(timeout=5)["n"] == 1

            redis_process.stop()
            started = time.monotonic()
            a.publish("ch", {"n": 2})  # queued: the publisher thread logs that Redis did not take it
            assert time.monotonic() - started < 1  # never waits on Redis
            deadline = time.monotonic() + 5
            while not any("not published" in r.getMessage() and "Redis is unreachable" in r.getMessage()
                          for r in caplog.records):
                assert time.monotonic() < deadline, "the publisher did not say the message was lost"
                time.sleep(0.05)
            while not any("connection lost" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "the listener did not notice the outage"
                time.sleep(0.05)

            redis_process.start()  # the same port
            deadline = time.monotonic() + 15
            delivered = None
            while delivered is None:
                assert time.monotonic() < deadline, "delivery did not resume"
                a.publish("ch", {"n": 3})  # lost until the listener has subscribed again
                try:
                    delivered = got.get(timeout=0.2)
                except queue.Empty:
                    pass
            assert delivered["n"] == 3
            deadline = time.monotonic() + 5
            while not any("connection back" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        a.close()
        b.close()


def test_a_watcher_hears_the_connection_lost_and_back_then_messages_flow_again(redis_process) -> None:
    """What a subscriber missed can only be known from the moments the connection was lost:
    the session table re-checks the sessions it holds from them (transports/http_sessions.py)."""
    a = RedisBus(redis_process.url, prefix="watch:", origin="proc-a")
    b = RedisBus(redis_process.url, prefix="watch:", origin="proc-b")
    got: queue.Queue[Any] = queue.Queue()
    heard: queue.Queue[bool] = queue.Queue()
    try:
        b.watch(heard.put)
        b.subscribe("ch", got.put)
        a.publish("ch", {"n": 1})
        assert got.get(timeout=5)["n"] == 1
        redis_process.stop()
        assert heard.get(timeout=5) is False
        redis_process.start()
        assert heard.get(timeout=15) is True  # told once subscribed again: nothing published from now on is missed
        a.publish("ch", {"n": 2})
        assert got.get(timeout=5)["n"] == 2
        assert heard.empty()
    finally:
        a.close()
        b.close()


def test_a_connection_redis_py_remade_on_its_own_counts_as_lost(redis_process) -> None:
    """redis-py reconnects a pub/sub connection and re-subscribes without raising when Redis
    answers again at once (a fast restart, a killed connection): messages were missed all the
    same, and the watcher hears of it."""
    import redis

    a = RedisBus(redis_process.url, prefix="remade:", origin="proc-a")
    b = RedisBus(redis_process.url, prefix="remade:", origin="proc-b")
    got: queue.Queue[Any] = queue.Queue()
    heard: queue.Queue[bool] = queue.Queue()
    admin = redis.Redis.from_url(redis_process.url)
    try:
        b.watch(heard.put)
        b.subscribe("ch", got.put)
        b.subscribe("other", lambda message: None)
        a.publish("ch", {"n": 1})
        assert got.get(timeout=5)["n"] == 1
        assert admin.client_kill_filter(_type="pubsub") == 1
        assert [heard.get(timeout=5), heard.get(timeout=5)] == [False, True]
        a.publish("ch", {"n": 2})
        assert got.get(timeout=5)["n"] == 2
    finally:
        admin.close()
        a.close()
        b.close()


def test_a_memory_bus_never_loses_its_connection() -> None:
    bus = MemoryBus()
    heard: list[bool] = []
    stop = bus.watch(heard.append)
    bus.subscribe("ch", lambda message: None)
    bus.publish("ch", {"n": 1})
    stop()
    stop()
    assert heard == []


def test_subscribing_while_redis_is_down_does_not_hang(dead_url: str) -> None:
    bus = RedisBus(dead_url, origin="proc-a", subscribe_timeout=0.3)
    try:
        started = time.monotonic()
        bus.subscribe("ch", lambda m: None)  # made once Redis is there
        assert time.monotonic() - started < 2
        bus.publish("ch", {"n": 1})  # queued, and dropped with a warning once Redis refuses it
    finally:
        bus.close()
    with pytest.raises(RuntimeError, match="closed"):
        bus.publish("ch", {"n": 1})


# ---------------------------------------------------------------------- MemoryBus


def test_the_memory_bus_delivers_synchronously_to_other_processes_only() -> None:
    bus = MemoryBus(origin="me")
    peer = bus.peer("peer")
    mine: list[Any] = []
    own: list[Any] = []
    theirs: list[tuple[Any, int]] = []
    bus.subscribe("ch", mine.append)
    bus.subscribe("ch", own.append, include_own=True)
    peer.subscribe("ch", lambda m: theirs.append((m, threading.get_ident())))
    bus.publish("ch", {"n": 1})
    # delivered before publish returned, in the publishing thread
    assert theirs == [({"n": 1, "origin": "me"}, threading.get_ident())]
    assert own == [{"n": 1, "origin": "me"}]
    assert mine == []
    peer.publish("ch", {"n": 2})
    assert mine == [{"n": 2, "origin": "peer"}]
    assert len(theirs) == 1  # the peer's own message is not echoed to it
    assert MemoryBus().origin == MemoryBus().origin  # one process, one id


def test_the_memory_bus_copies_logs_unsubscribes_and_closes(caplog) -> None:
    bus = MemoryBus(origin="me")
    peer = bus.peer()
    assert peer.origin != bus.origin
    got: list[Any] = []

    def broken(message: dict[str, Any]) -> None:
        message["mutated"] = True
        raise RuntimeError("callback bug")

    peer.subscribe("ch", broken)
    stop = peer.subscribe("ch", got.append)
    with caplog.at_level(logging.ERROR, logger="mcpkit.stores.bus"):
        bus.publish("ch", {"n": 1})  # the broken callback does not reach the publisher
    assert got == [{"n": 1, "origin": "me"}]  # a copy of its own, untouched by the other callback
    assert any(r.exc_info for r in caplog.records)
    stop()
    stop()
    bus.publish("ch", {"n": 2})
    assert len(got) == 1
    with pytest.raises(ValueError, match="origin"):
        bus.publish("ch", {"origin": "x"})
    peer.subscribe("ch", got.append)
    peer.close()
    bus.publish("ch", {"n": 3})
    assert len(got) == 1
    with pytest.raises(RuntimeError, match="closed"):
        peer.publish("ch", {})
