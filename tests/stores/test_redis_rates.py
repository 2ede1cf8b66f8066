"""RedisRateStore: one token bucket shared by several processes, on the Redis clock."""

from __future__ import annotations

import math
import time

import pytest

from mcpkit.policy.ratelimit import KEY_SEPARATOR, Rate, RateLimiter
from mcpkit.stores.redis import RedisRateStore, StoreUnavailable
from mcpkit.stores.redis_rates import _TAKE


@pytest.fixture
def two_stores(redis_url: str, prefix: str):
    a, b = RedisRateStore(redis_url, prefix=prefix), RedisRateStore(redis_url, prefix=prefix)
    yield a, b
    a.close()
    b.close()


def test_a_bucket_shared_by_two_processes_is_one_global_limit(two_stores) -> None:
    a, b = two_stores
    key = f"alice{KEY_SEPARATOR}search"
    # the callers' clocks disagree wildly; the Redis clock is the one that counts
    waits = [(a if i % 2 else b).take(key, 5, 5 / 60, now=0.0 if i % 2 else 1e9) for i in range(12)]
    assert waits.count(0.0) == 5
    assert waits[:5] == [0.0] * 5
    assert all(w > 0 for w in waits[5:])


def test_the_retry_time_is_what_the_bucket_needs(two_stores) -> None:
    a, b = two_stores
    assert a.take("k", 2, 4.0, 0) == 0.0
    assert b.take("k", 2, 4.0, 0) == 0.0
    wait = a.take("k", 2, 4.0, 0)
    assert 0 < wait <= 0.25  # one token at 4 a second
    time.sleep(wait + 0.02)
    assert b.take("k", 2, 4.0, 0) == 0.0  # waiting the advertised time is enough
    big = a.take("k", 2, 4.0, 0, cost=2.0)
    assert 0.25 < big <= 0.5


def test_costs_above_the_capacity_never_pass_and_touch_nothing(two_stores, prefix: str, rclient) -> None:
    a, _ = two_stores
    assert a.take("k", 2, 1.0, 0, cost=3.0) == math.inf
    assert not rclient.exists(f"{prefix}rl:k")


def test_bucket_keys_expire_once_the_bucket_would_be_full(two_stores, prefix: str, rclient) -> None:
    a, _ = two_stores
    key = f"bob{KEY_SEPARATOR}tool"
    a.take(key, 10, 10.0, 0)  # one token short: full again in 0.1 s
    pttl = rclient.pttl(f"{prefix}rl:{key}")
    assert 0 < pttl <= 100 + 1000
    for _ in range(9):
        a.take(key, 10, 1.0, 0)  # empty at one a second: full in about 10 s
    assert 9_000 < rclient.pttl(f"{prefix}rl:{key}") <= 11_000
    assert set(rclient.hgetall(f"{prefix}rl:{key}")) == {b"t", b"l"}


def test_the_script_is_loaded_again_after_a_script_flush(two_stores, rclient, prefix: str) -> None:
    a, b = two_stores
    # on a cluster, scripts are cached per node: ask the node that owns the bucket's key
    node = rclient.get_node_from_key(f"{prefix}rl:k").redis_connection \
        if hasattr(rclient, "get_node_from_key") else rclient
    assert a.take("k", 3, 1.0, 0) == 0.0
    assert node.script_exists(_TAKE.sha) == [True]
    node.script_flush()
    assert node.script_exists(_TAKE.sha) == [False]
    assert b.take("k", 3, 1.0, 0) == 0.0  # NOSCRIPT, then EVAL: the bucket state survived
    assert node.script_exists(_TAKE.sha) == [True]
    assert a.take("k", 3, 1.0, 0) == 0.0
    assert a.take("k", 3, 1.0, 0) > 0


def test_the_limiter_runs_on_a_redis_store(redis_url: str, prefix: str) -> None:
    store = RedisRateStore(redis_url, prefix=prefix)
    other = RateLimiter("3/min", store=RedisRateStore(redis_url, prefix=prefix))
    limiter = RateLimiter("3/min", store=store)
    try:
        assert [limiter.check("p", "t"), other.check("p", "t"), limiter.check("p", "t")] == [None, None, None]
        retry_ms = other.check("p", "t")
        assert retry_ms is not None and 19_000 < retry_ms <= 20_000
        assert limiter.check("p", "u", Rate(1, 60)) is None  # another tool, another bucket
    finally:
        store.close()
        other.store.close()  # type: ignore[attr-defined]


def test_an_unreachable_redis_raises_store_unavailable(dead_url: str) -> None:
    store = RedisRateStore(dead_url)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="rate-limit"):
        store.take("k", 1, 1.0, 0)
    assert time.monotonic() - started < 5
    store.close()


def test_the_rate_store_wants_a_sync_client(redis_url: str) -> None:
    import redis.asyncio

    with pytest.raises(TypeError, match="synchronous"):
        RedisRateStore(redis.asyncio.Redis.from_url(redis_url))
    with pytest.raises(ValueError, match="decode_responses"):
        RedisRateStore(redis.Redis.from_url(redis_url, decode_responses=True))
