"""RedisBus.publish never waits on Redis: a publisher thread sends what it queues, in order; a
full queue drops with a warning; close sends what is queued first (stores/redis_bus.py)."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from typing import Any

import pytest

from mcpkit.stores.redis import RedisBus
from mcpkit.stores.redis_base import sync_client

pytest.importorskip("redis", reason="RedisBus needs the redis package")

BOUND = 10.0  # a hang guard, never a performance bound


class GatedClient:
    """A stand-in for redis.Redis whose PUBLISH waits until ``gate`` is open, as a paused Redis
    makes it wait; it records what it was given, in order."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.sending = threading.Event()  # set once the publisher is inside a PUBLISH
        self.published: list[tuple[str, dict[str, Any]]] = []

    def publish(self, channel: str, data: bytes) -> int:
        self.sending.set()
        assert self.gate.wait(BOUND), "the test never opened the gate"
        self.published.append((channel, json.loads(data)))
        return 1

    def close(self) -> None:
        pass


def numbers(client: GatedClient) -> list[int]:
    return [message["n"] for _, message in client.published]


def test_publish_returns_while_redis_does_not_answer_and_order_is_kept() -> None:
    client = GatedClient()
    bus = RedisBus(client, prefix="p:", origin="proc-a")
    try:
        started = time.monotonic()
        for n in range(200):
            bus.publish("ch", {"n": n})  # the first one is stuck in PUBLISH until the gate opens
        assert time.monotonic() - started < BOUND
        assert client.sending.wait(BOUND)
        assert client.published == []  # nothing got through: publish did not wait for Redis
        client.gate.set()
    finally:
        bus.close()  # flushes
    assert numbers(client) == list(range(200))
    assert {channel for channel, _ in client.published} == {"p:bus:ch"}
    assert all(message["origin"] == "proc-a" for _, message in client.published)


def test_a_full_queue_drops_what_comes_with_one_warning(caplog: Any) -> None:
    client = GatedClient()
    bus = RedisBus(client, origin="proc-a", max_queue=3)
    try:
        with caplog.at_level(logging.WARNING, logger="mcpkit.stores.bus"):
            first = bus.publish("ch", {"n": 0})
            assert client.sending.wait(BOUND)  # taken off the queue, stuck in PUBLISH
            sent = [bus.publish("ch", {"n": n}) for n in range(1, 7)]  # 1-3 queued, 4-6 dropped
        full = [r for r in caplog.records if "dropping" in r.getMessage()]
        assert len(full) == 1 and full[0].levelno == logging.WARNING, caplog.records
        assert [f.result(0) for f in sent[3:]] == [False] * 3  # a dropped message says so at once
        assert not first.done()  # ... one Redis has not taken yet says nothing
        client.gate.set()
        assert first.result(BOUND) is True
    finally:
        bus.close()
    assert numbers(client) == [0, 1, 2, 3]
    assert [f.result(0) for f in sent[:3]] == [True] * 3


def test_close_publishes_what_is_queued_first() -> None:
    client = GatedClient()
    bus = RedisBus(client, origin="proc-a")
    for n in range(50):
        bus.publish("ch", {"n": n})
    assert client.sending.wait(BOUND)
    closing = threading.Thread(target=bus.close)
    closing.start()
    client.gate.set()  # Redis answers again while close waits for the queue to empty
    closing.join(BOUND)
    assert not closing.is_alive()
    assert numbers(client) == list(range(50))
    with pytest.raises(RuntimeError, match="closed"):
        bus.publish("ch", {"n": 50})


def test_close_gives_up_after_its_flush_timeout_and_says_what_was_lost(caplog: Any) -> None:
    client = GatedClient()
    bus = RedisBus(client, origin="proc-a", flush_timeout=0.2)
    for n in range(5):
        bus.publish("ch", {"n": n})
    assert client.sending.wait(BOUND)
    with caplog.at_level(logging.WARNING, logger="mcpkit.stores.bus"):
        bus.close()  # Redis never answers: close does not hang on it
    assert any("closed with 4 messages not published" in r.getMessage() for r in caplog.records), caplog.records
    client.gate.set()


def test_messages_reach_a_subscriber_in_the_order_they_were_published(redis_url: str, prefix: str) -> None:
    a = RedisBus(redis_url, prefix=prefix, origin="proc-a")
    b = RedisBus(redis_url, prefix=prefix, origin="proc-b")
    got: queue.Queue[Any] = queue.Queue()
    try:
        b.subscribe("ch", got.put)
        for n in range(300):
            a.publish("ch", {"n": n})
        received = [got.get(timeout=BOUND)["n"] for _ in range(300)]
        assert received == list(range(300))
    finally:
        a.close()
        b.close()


def test_a_message_redis_refuses_is_logged_and_the_next_ones_go_on(dead_url: str, caplog: Any) -> None:
    bus = RedisBus(dead_url, origin="proc-a", flush_timeout=BOUND, retry_for=0)  # each tried once
    with caplog.at_level(logging.WARNING, logger="mcpkit.stores.bus"):
        started = time.monotonic()
        bus.publish("ch", {"n": 1})
        bus.publish("ch", {"n": 2})
        assert time.monotonic() - started < 1  # never waits on Redis
        bus.close()  # waits for the publisher, which logs each failure
    lost = [r for r in caplog.records if "not published" in r.getMessage() and "Redis is unreachable" in r.getMessage()]
    assert len(lost) == 2, caplog.records


class FlakyClient:
    """In front of a real Redis client: the first ``refuse`` PUBLISHes fail as an unreachable
    node's do (ConnectionError, never sent), and the first ``lose_answer`` PUBLISHes after them
    reach Redis but their answer is lost (TimeoutError, as from a paused Redis)."""

    def __init__(self, real: Any, *, refuse: int = 0, lose_answer: int = 0) -> None:
        self.real = real
        self.refuse = refuse
        self.lose_answer = lose_answer
        self.attempts = 0

    def publish(self, channel: str, data: bytes) -> int:
        import redis

        self.attempts += 1
        if self.refuse:
            self.refuse -= 1
            raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
        taken = self.real.publish(channel, data)
        if self.lose_answer:
            self.lose_answer -= 1
            raise redis.TimeoutError("Timeout reading from socket")
        return int(taken)

    def close(self) -> None:
        self.real.close()


def test_a_message_the_node_could_not_take_is_published_again_and_delivered_once(redis_url: str,
                                                                                 prefix: str) -> None:
    # a Redis Cluster's node killed: the process publishing through it dropped the message, and
    # the subscribers, on live nodes, had no outage of their own to resync from
    flaky = FlakyClient(sync_client(redis_url, "test")[0], refuse=3)
    a = RedisBus(flaky, prefix=prefix, origin="proc-a")
    b = RedisBus(redis_url, prefix=prefix, origin="proc-b")
    got: queue.Queue[Any] = queue.Queue()
    try:
        b.subscribe("ch", got.put)
        sent = [a.publish("ch", {"n": n}) for n in range(3)]
        assert [f.result(BOUND) for f in sent] == [True, True, True]
        assert [got.get(timeout=BOUND)["n"] for _ in range(3)] == [0, 1, 2]  # all of them, in order
        assert flaky.attempts == 6
    finally:
        a.close()
        b.close()


def test_a_message_published_again_after_redis_took_it_is_delivered_once(redis_url: str, prefix: str) -> None:
    flaky = FlakyClient(sync_client(redis_url, "test")[0], lose_answer=1)
    a = RedisBus(flaky, prefix=prefix, origin="proc-a")
    b = RedisBus(redis_url, prefix=prefix, origin="proc-b")
    got: queue.Queue[Any] = queue.Queue()
    try:
        b.subscribe("ch", got.put)
        assert a.publish("ch", {"n": 1}).result(BOUND) is True
        assert a.publish("ch", {"n": 2}).result(BOUND) is True
        assert flaky.attempts == 3  # the first was sent twice
        received = [got.get(timeout=BOUND) for _ in range(2)]
        assert [m["n"] for m in received] == [1, 2]
        assert all(set(m) == {"n", "origin"} for m in received)  # the message id is the bus's own
        with pytest.raises(queue.Empty):
            got.get(timeout=0.5)  # the second copy of 1 was not delivered
    finally:
        a.close()
        b.close()


def test_close_ends_the_retries_of_a_message_redis_cannot_take(dead_url: str, caplog: Any) -> None:
    bus = RedisBus(dead_url, origin="proc-a", flush_timeout=0.3, retry_for=60)
    sent = bus.publish("ch", {"n": 1})
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="mcpkit.stores.bus"):
        bus.close()
    assert sent.result(BOUND) is False
    assert time.monotonic() - started < BOUND  # not the minute it would have tried
