"""RedisEventStore: SSE events stored by one process, replayed by any other."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from mcpkit.stores.redis import RedisEventStore, StoreUnavailable

pytestmark = pytest.mark.asyncio


async def test_events_stored_by_one_process_are_replayed_by_another(redis_url: str, prefix: str) -> None:
    a = RedisEventStore(redis_url, prefix=prefix)
    b = RedisEventStore(redis_url, prefix=prefix)
    try:
        first = await a.store("sess.1", b"")  # a priming event has no data
        second = await b.store("sess.1", b'{"jsonrpc":"2.0"}')
        third = await a.store("sess.1", b"\x00\xff binary")
        other = await b.store("sess.2", b"elsewhere")
        assert (first, second, third, other) == ("sess.1_1", "sess.1_2", "sess.1_3", "sess.2_1")

        assert await b.replay_after(first) == ("sess.1", [(second, b'{"jsonrpc":"2.0"}'), (third, b"\x00\xff binary")])
        assert await a.replay_after(second) == ("sess.1", [(third, b"\x00\xff binary")])
        assert await a.replay_after(third) == ("sess.1", [])  # known stream, nothing newer
        assert await b.replay_after(other) == ("sess.2", [])  # only that stream's events
        assert await a.replay_after("sess.1_0") == ("sess.1", [(first, b""), (second, b'{"jsonrpc":"2.0"}'),
                                                                (third, b"\x00\xff binary")])
    finally:
        await a.aclose()
        await b.aclose()


async def test_unknown_or_malformed_ids_replay_nothing(redis_url: str, prefix: str) -> None:
    store = RedisEventStore(redis_url, prefix=prefix)
    try:
        await store.store("s_with_underscores", b"x")
        assert await store.replay_after("s_with_underscores_0") == ("s_with_underscores", [(
            "s_with_underscores_1", b"x")])
        for bad in ("nounderscore", "s_with_underscores_", "s_with_underscores_x1", "s_with_underscores_\u00b2",
                    "unknown_1", "_1"):
            assert await store.replay_after(bad) is None, bad
        assert await store.replay_after(f"s_with_underscores_{2**70}") == ("s_with_underscores", [])
    finally:
        await store.aclose()


def _writer(url: str, prefix: str, stream: str, count: int, out: list[str], start: threading.Barrier) -> None:
    async def run() -> None:
        store = RedisEventStore(url, prefix=prefix)  # a client (connection pool) of its own
        try:
            start.wait()
            for i in range(count):
                out.append(await store.store(stream, f"{threading.get_ident()}:{i}".encode()))
        finally:
            await store.aclose()

    asyncio.run(run())


async def test_concurrent_writers_get_unique_ordered_ids(redis_url: str, prefix: str) -> None:
    writers, each = 4, 50
    results: list[list[str]] = [[] for _ in range(writers)]
    start = threading.Barrier(writers)
    threads = [threading.Thread(target=_writer, args=(redis_url, prefix, "s.1", each, results[i], start))
               for i in range(writers)]
    for t in threads:
        t.start()
    await asyncio.to_thread(lambda: [t.join(30) for t in threads])
    ids = [eid for r in results for eid in r]
    assert len(ids) == writers * each
    assert sorted(int(e.rpartition("_")[2]) for e in ids) == list(range(1, writers * each + 1))
    for r in results:  # each writer's ids increase
        numbers = [int(e.rpartition("_")[2]) for e in r]
        assert numbers == sorted(numbers)

    reader = RedisEventStore(redis_url, prefix=prefix)
    try:
        found = await reader.replay_after("s.1_0")
        assert found is not None
        replayed = found[1]
        assert [eid for eid, _ in replayed] == [f"s.1_{n}" for n in range(1, writers * each + 1)]
        by_id = {eid: payload for eid, payload in replayed}
        for r in results:  # every payload is under the id its writer was given
            owners = {by_id[eid].split(b":")[0] for eid in r}
            assert len(owners) == 1
    finally:
        await reader.aclose()


async def test_streams_are_trimmed_to_the_newest_events(redis_url: str, prefix: str, rclient) -> None:
    store = RedisEventStore(redis_url, prefix=prefix, max_events_per_stream=3)
    try:
        ids = [await store.store("s.1", b"%d" % i) for i in range(6)]
        assert ids == [f"s.1_{n}" for n in range(1, 7)]
        assert rclient.xlen(f"{prefix}ev:{{s}}.1") == 3
        assert await store.replay_after("s.1_1") == ("s.1", [("s.1_4", b"3"), ("s.1_5", b"4"), ("s.1_6", b"5")])
        assert await store.store("s.1", b"6") == "s.1_7"  # numbering goes on past the trimmed events
    finally:
        await store.aclose()


async def test_every_write_sets_the_ttl(redis_url: str, prefix: str, rclient) -> None:
    store = RedisEventStore(redis_url, prefix=prefix, ttl=30.0)
    short = RedisEventStore(redis_url, prefix=prefix, ttl=0.2)
    try:
        await store.store("s.1", b"a")
        key = f"{prefix}ev:{{s}}.1"
        assert 0 < rclient.pttl(key) <= 30_000
        rclient.pexpire(key, 5_000)
        await store.store("s.1", b"b")
        assert rclient.pttl(key) > 5_000  # refreshed by the write

        await short.store("s.2", b"a")
        assert 0 < rclient.pttl(f"{prefix}ev:{{s}}.2") <= 200
        await asyncio.sleep(0.35)
        assert await short.replay_after("s.2_0") is None  # expired
    finally:
        await store.aclose()
        await short.aclose()


async def test_drop_forgets_streams(redis_url: str, prefix: str, rclient) -> None:
    store = RedisEventStore(redis_url, prefix=prefix)
    try:
        for sid in ("s.1", "s.2", "s.get"):
            await store.store(sid, b"x")
        await store.drop(["s.1", "s.get", "never.seen"])
        await store.drop([])
        assert await store.replay_after("s.1_0") is None
        assert await store.replay_after("s.get_0") is None
        assert await store.replay_after("s.2_0") == ("s.2", [("s.2_1", b"x")])
        assert not rclient.exists(f"{prefix}ev:{{s}}.1", f"{prefix}ev:{{s}}.get")
    finally:
        await store.aclose()


async def test_an_unreachable_redis_raises_store_unavailable_quickly(dead_url: str) -> None:
    store = RedisEventStore(dead_url)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="Redis is unreachable"):
            await store.store("s.1", b"x")
        with pytest.raises(StoreUnavailable):
            await store.replay_after("s.1_1")
        assert time.monotonic() - started < 5
    finally:
        await store.aclose()


async def test_the_event_store_wants_an_asyncio_client(redis_url: str) -> None:
    import redis

    sync = redis.Redis.from_url(redis_url)
    with pytest.raises(TypeError, match="asynchronous"):
        RedisEventStore(sync)
    sync.close()
    with pytest.raises(ValueError, match="max_events_per_stream"):
        RedisEventStore(redis_url, max_events_per_stream=0)


async def test_follow_waits_for_the_events_another_process_stores_next(redis_url: str, prefix: str) -> None:
    a = RedisEventStore(redis_url, prefix=prefix)
    b = RedisEventStore(redis_url, prefix=prefix)
    try:
        first = await a.store("sess.7", b"one")
        assert await b.follow("sess.7", 1, 0.05) == []  # nothing newer: waited, then nothing
        waiting = asyncio.ensure_future(b.follow("sess.7", 1, 1.5))
        await asyncio.sleep(0)  # sent before or after the store, the read returns the event
        second = await a.store("sess.7", b"two")
        assert await waiting == [(second, b"two")]
        assert await b.follow("sess.7", 0, 0.05) == [(first, b"one"), (second, b"two")]
    finally:
        await a.aclose()
        await b.aclose()
