"""The in-memory event store refuses ids whose counter is not ASCII digits."""

from __future__ import annotations

import pytest

from mcpkit.stores.memory import MemoryEventStore


@pytest.mark.asyncio
async def test_a_non_ascii_digit_counter_is_an_unknown_id():
    store = MemoryEventStore()
    eid = await store.store("s1", b"x")
    assert (await store.replay_after(eid)) == ("s1", [])
    assert await store.replay_after("s1_²") is None  # "²".isdigit() is true; int("²") would raise


@pytest.mark.asyncio
async def test_a_stream_dropped_with_a_grace_stays_resumable_until_it_ends(monkeypatch):
    import mcpkit.stores.memory as memory

    now = [1000.0]
    monkeypatch.setattr(memory.time, "monotonic", lambda: now[0])
    store = MemoryEventStore()
    first = await store.store("s1", b"a")
    await store.store("s1", b"b")
    await store.drop(["s1"], 30.0)
    assert await store.replay_after(first) == ("s1", [("s1_2", b"b")])
    now[0] += 31.0
    assert await store.replay_after(first) is None
    assert len(store) == 0


@pytest.mark.asyncio
async def test_redis_drop_with_a_grace_sets_an_expiry(redis_url: str, prefix: str, rclient):
    from mcpkit.stores.redis_events import RedisEventStore

    store = RedisEventStore(redis_url, prefix=prefix)
    try:
        await store.store("s.1", b"x")
        await store.drop(["s.1"], 5.0)
        assert 0 < rclient.pttl(store.key("s.1")) <= 5000
        assert await store.replay_after("s.1_0") == ("s.1", [("s.1_1", b"x")])
        await store.drop(["s.1"])
        assert await store.replay_after("s.1_0") is None
    finally:
        await store.aclose()
