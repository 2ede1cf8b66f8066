"""The Stores bundle: from_url for Redis, Stores.memory(), and redis-py imported only on demand."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mcpkit.policy.ratelimit import MemoryRateStore
from mcpkit.stores.memory import MemoryEventStore
from mcpkit.stores.redis import (
    MemoryBus,
    MemorySessionStore,
    RedisBus,
    RedisEventStore,
    RedisRateStore,
    RedisSessionStore,
    RedisTaskStore,
    Stores,
    from_url,
)
from mcpkit.stores.tasks import MemoryTaskStore


def kwargs(client) -> dict:
    return client.connection_pool.connection_kwargs


def test_from_url_reads_the_prefix_and_the_database() -> None:
    stores = from_url("redis://:secret@redis.example:6390/5?prefix=myapp:&health_check_interval=7")
    assert isinstance(stores.events, RedisEventStore) and isinstance(stores.rates, RedisRateStore)
    assert isinstance(stores.tasks, RedisTaskStore) and isinstance(stores.sessions, RedisSessionStore)
    assert isinstance(stores.bus, RedisBus)
    for store in (stores.events, stores.rates, stores.tasks, stores.sessions, stores.bus):
        assert store.prefix == "myapp:"
    sync = kwargs(stores.rates._client)
    assert (sync["host"], sync["port"], sync["db"], sync["password"]) == ("redis.example", 6390, 5, "secret")
    assert sync["health_check_interval"] == 7  # other query arguments are redis-py's
    assert kwargs(stores.events._client)["db"] == 5
    assert stores.tasks._client is stores.sessions._client is stores.bus._client  # one pool
    stores.close()

    default = from_url("redis://localhost")
    assert default.rates.prefix == "mcpkit:" and kwargs(default.rates._client).get("db", 0) == 0
    assert from_url("redis://localhost?db=2&prefix=").rates.prefix == ""
    assert kwargs(from_url("redis://localhost?db=2").sessions._client)["db"] == 2
    tls = from_url("rediss://localhost:6380/1")
    assert tls.rates._client.connection_pool.connection_class.__name__ == "SSLConnection"
    for bad in ("http://localhost:6379", "localhost:6379", "memcached://x"):
        with pytest.raises(ValueError, match="redis://"):
            from_url(bad)


def test_from_url_reads_the_lease_on_running_tasks() -> None:
    default = from_url("redis://localhost")
    assert (default.tasks.lease, default.tasks.renew_every) == (5.0, 1.0)
    tuned = from_url("redis://localhost/0?prefix=a:&task_lease=12&task_renew=2.5&db=3")
    assert (tuned.tasks.lease, tuned.tasks.renew_every, tuned.tasks.prefix) == (12.0, 2.5, "a:")
    assert kwargs(tuned.tasks._client)["db"] == 3 and "task_lease" not in kwargs(tuned.tasks._client)
    for stores in (default, tuned):
        stores.close()
    for query, message in (("task_lease=abc", "task_lease='abc' must be a number of seconds"),
                           ("task_lease=0", "task_lease must be a positive number"),
                           ("task_renew=nan", "task_renew must be a positive number"),
                           ("task_lease=4&task_renew=3", r"task_renew \(3 s\) must be at most half of task_lease")):
        with pytest.raises(ValueError, match=message):
            from_url(f"redis://localhost?{query}")


@pytest.mark.parametrize(("query", "said"), [
    ("task_lease=2&task_renew=1.5", "task_renew (1.5 s) must be at most half of task_lease (2 s)"),
    # redis-py passed it to its connections, which failed with a TypeError at the first command
    # while the server kept running
    ("bogus=1", "query argument 'bogus' is not one mcpkit or redis-py takes"),
])
@pytest.mark.parametrize("http", [["--http", "127.0.0.1:0"], []], ids=["http", "stdio"])
def test_a_wrong_query_in_mcpkit_store_is_one_line_and_exit_2(tmp_path, query: str, said: str, http) -> None:
    import os

    from tests.conftest import mcpkit_command

    app = tmp_path / "app.py"
    app.write_text("from mcpkit import Server\nserver = Server('t')\n")
    env = {**os.environ, "MCPKIT_STORE": f"redis://127.0.0.1:1/0?{query}"}
    # on stdio, where nothing connects to the store before a request needs it, it started
    done = subprocess.run(mcpkit_command("serve", str(app), *http), capture_output=True,
                          text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_redis_py_connection_arguments_in_the_store_url_are_still_taken(redis_url: str) -> None:
    joined = "&" if "?" in redis_url else "?"
    stores = from_url(f"{redis_url}{joined}socket_timeout=2&client_name=mcpkit-test&health_check_interval=5")
    try:
        stores.sessions.save("s-args", {}, 5)
    finally:
        stores.close()


@pytest.mark.asyncio
async def test_a_redis_bundle_works_end_to_end(redis_url: str, prefix: str, rclient) -> None:
    stores = from_url(f"{redis_url}{'&' if '?' in redis_url else '?'}prefix={prefix}")
    try:
        stores.sessions.save("s1", {"logLevel": "info"}, 60)
        assert rclient.get(f"{prefix}session:{{s1}}") == b'{"logLevel":"info"}'
        assert stores.rates.take("k", 1, 1.0, 0) == 0.0 and stores.rates.take("k", 1, 1.0, 0) > 0
        assert await stores.events.store("s.1", b"x") == "s.1_1"
        assert await stores.events.replay_after("s.1_0") == ("s.1", [("s.1_1", b"x")])
    finally:
        await stores.aclose()


def test_the_memory_bundle() -> None:
    stores = Stores.memory()
    assert isinstance(stores.events, MemoryEventStore) and isinstance(stores.rates, MemoryRateStore)
    assert isinstance(stores.tasks, MemoryTaskStore) and isinstance(stores.sessions, MemorySessionStore)
    assert isinstance(stores.bus, MemoryBus)
    stores.close()


def test_redis_is_imported_only_when_a_redis_store_is_made() -> None:
    script = textwrap.dedent(
        """
        import sys
        import mcpkit, mcpkit.stores.redis as r
        r.Stores.memory()
        before = "redis" in sys.modules
        r.from_url("redis://localhost:1/0")
        print(before, "redis" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_a_missing_redis_package_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    for make in (RedisSessionStore, RedisRateStore, RedisTaskStore, RedisBus, RedisEventStore, from_url):
        with pytest.raises(ImportError, match=r"pip install 'mcpkit\[redis\]'"):
            make("redis://localhost:6379/0")
