"""SessionStore: the same contract in memory and in Redis."""

from __future__ import annotations

import time

import pytest

from mcpkit.stores.redis import MemorySessionStore, RedisSessionStore, StoreUnavailable

STATE = {
    "protocolVersion": "2025-11-25",
    "clientCapabilities": {"roots": {"listChanged": True}, "sampling": {}},
    "clientInfo": {"name": "t", "version": "1"},
    "logLevel": "info",
    "subscriptions": ["file:///a.txt"],
    "principal": "alice",
}


@pytest.fixture(params=["memory", "redis", "cluster"])
def sessions(request):
    if request.param == "memory":
        yield MemorySessionStore()
        return
    url = request.getfixturevalue("plain_redis_url" if request.param == "redis" else "cluster_url")
    store = RedisSessionStore(url, prefix=request.getfixturevalue("prefix"))
    yield store
    store.close()


def test_state_round_trips_as_a_copy(sessions) -> None:
    sessions.save("s1", STATE, 60)
    loaded = sessions.load("s1")
    assert loaded == STATE
    loaded["logLevel"] = "debug"
    assert sessions.load("s1")["logLevel"] == "info"  # nothing changes until saved again
    sessions.save("s1", loaded, 60)
    assert sessions.load("s1")["logLevel"] == "debug"
    assert sessions.load("unknown") is None


def test_sessions_expire_and_touch_extends_them(sessions) -> None:
    sessions.save("short", STATE, 0.3)
    sessions.save("kept", STATE, 0.3)
    time.sleep(0.15)
    assert sessions.touch("kept", 2.0) is True
    assert sessions.touch("unknown", 2.0) is False
    time.sleep(0.3)
    assert sessions.load("short") is None
    assert sessions.load("kept") == STATE
    assert sessions.touch("short", 2.0) is False  # too late


def test_delete_forgets_a_session(sessions) -> None:
    sessions.save("s1", STATE, 60)
    sessions.delete("s1")
    sessions.delete("s1")
    assert sessions.load("s1") is None


def test_update_never_brings_back_a_session_that_ended(sessions) -> None:
    sessions.save("s1", STATE, 60)
    assert sessions.update("s1", {**STATE, "logLevel": "debug"}, 60) is True
    assert sessions.load("s1")["logLevel"] == "debug"
    sessions.delete("s1")  # ended, by another process that this one has not heard from yet
    assert sessions.update("s1", STATE, 60) is False
    assert sessions.load("s1") is None
    assert sessions.update("never-saved", STATE, 60) is False
    assert sessions.load("never-saved") is None


def test_existing_says_which_sessions_the_store_still_has(sessions) -> None:
    for sid in ("a", "b", "c"):
        sessions.save(sid, STATE, 60)
    sessions.save("short", STATE, 0.05)
    sessions.delete("b")
    time.sleep(0.1)
    assert sessions.existing(["a", "b", "c", "short", "unknown"]) == {"a", "c"}
    assert sessions.existing([]) == set()


def test_bad_arguments_are_refused(sessions) -> None:
    for ttl in (0, -1, float("inf"), float("nan"), True):
        with pytest.raises(ValueError, match="ttl"):
            sessions.save("s1", STATE, ttl)
    with pytest.raises(TypeError, match="dict"):
        sessions.save("s1", ["not", "a", "dict"], 60)  # type: ignore[arg-type]


def test_redis_sessions_have_a_key_expiry(redis_url: str, prefix: str, rclient) -> None:
    store = RedisSessionStore(redis_url, prefix=prefix)
    other = RedisSessionStore(redis_url, prefix=prefix)
    store.save("s1", STATE, 60)
    key = f"{prefix}session:{{s1}}"
    assert 59_000 < rclient.pttl(key) <= 60_000
    assert other.load("s1") == STATE  # another process sees it
    other.touch("s1", 600)
    assert 599_000 < rclient.pttl(key) <= 600_000
    store.close()
    other.close()


def test_memory_sessions_are_bounded() -> None:
    store = MemorySessionStore(max_sessions=2)
    for sid in ("a", "b", "c"):
        store.save(sid, {}, 60)
    assert len(store) == 2 and store.load("a") is None
    store.touch("b", 60)  # b is now the most recent; c goes next
    store.save("d", {}, 60)
    assert store.load("c") is None and store.load("b") == {} and store.load("d") == {}


def test_an_unreachable_redis_raises_store_unavailable(dead_url: str) -> None:
    store = RedisSessionStore(dead_url)
    with pytest.raises(StoreUnavailable, match="session"):
        store.load("s1")
    store.close()
