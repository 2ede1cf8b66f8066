"""A master of a Redis Cluster killed under two `mcpkit serve --http` processes: its replica takes
over within seconds, and sessions, their GET streams and subscriptions, a running task and a rate
limit's count carry on through it on both processes.

The test starts a cluster of its own (tools/start-redis-cluster.sh: three masters with a replica
each, cluster-node-timeout 2 s), so killing a node touches no other test. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.scaleout.test_store_outage import APP, BUS_BACK, stderr_of
from tests.scaleout.test_store_restart import listening, notified
from tests.stores.conftest import REDIS_SERVER, ClusterProcess, _missing
from tests.test_http import jsonrpc, start_server, stop_server

MODERN = "2026-07-28"
FAILOVER = 20.0  # after the kill: the replica is promoted and every process serves again (a hang guard)
BUS_CHANNELS = ("changed", "updated", "session")
BUS_LOST = "Redis bus: connection lost"
RATE_KEY = "rl:anonymous@127.0.0.1\x1fscarce"  # the bucket of an anonymous client of 127.0.0.1

pytestmark = pytest.mark.reliability


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[ClusterProcess]:
    if REDIS_SERVER is None:
        _missing("this test starts a Redis Cluster of its own: install redis-server")
    pytest.importorskip("redis")
    made = ClusterProcess(str(tmp_path))
    made.start()
    try:
        yield made
    finally:
        made.stop()


def masters(client: Any) -> dict[int, str]:
    """Slot -> the "host:port" of the master serving it, as the client learnt (CLUSTER SLOTS)."""
    return {slot: nodes[0].name for slot, nodes in client.nodes_manager.slots_cache.items()}


def slot(key: str) -> int:
    from redis.crc import key_slot

    return key_slot(key.encode())


def aligned_prefix(owner: dict[int, str]) -> str:
    """A key prefix whose rate bucket of ``scarce`` lives on the master of the bus's first
    channel (``changed``, subscribed first: its slot picks the node the bus listens on), so
    killing that master takes the bus's node and the bucket's at once."""
    for _ in range(10_000):
        prefix = f"f{secrets.token_hex(4)}:"
        if owner[slot(f"{prefix}bus:changed")] == owner[slot(f"{prefix}{RATE_KEY}")]:
            return prefix
    raise AssertionError("no prefix puts the bus and the rate bucket on one master")


def bus_node(client: Any, prefix: str) -> str:
    """The master both processes' buses listen on (PUBSUB NUMSUB is per node)."""
    found = []
    for node in client.get_primaries():
        counts = client.pubsub_numsub(*(f"{prefix}bus:{c}" for c in BUS_CHANNELS), target_nodes=node)
        if any(int(n) for _, n in counts):
            found.append(node.name)
    assert len(found) == 1, found
    return found[0]


def stored(body: bytes) -> bool:
    """Did every event of an SSE answer go through the event store (each has an event id)? While
    it cannot reach a slot's master the events are sent without one."""
    events = [event for event in body.decode().replace("\r\n", "\n").split("\n\n") if "data:" in event]
    return bool(events) and all(any(line.startswith("id:") and line[3:].strip() for line in event.splitlines())
                                for event in events)


async def answered(client: Any, message: dict[str, Any]) -> tuple[int, Any]:
    """(status, body) of a request, where the body is read to its end within a bound."""
    reply = await asyncio.wait_for(client.post(message), 15)
    body = await asyncio.wait_for(reply.read(), 15)
    if reply.status == 503:
        assert int(reply.headers["retry-after"]) >= 1, reply.headers
    return reply.status, body


def retryable_or_served(status: int, body: bytes) -> bool:
    """200 with a result, or a refusal that says to retry (503 + Retry-After, a retryable error)."""
    if status == 503:
        return True
    if status != 200:
        return False
    text = body.decode()
    payloads = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")] or [text]
    for payload in payloads:
        if not payload:
            continue
        message = json.loads(payload)
        if "error" in message:
            data = message["error"].get("data") or {}
            return message["error"]["code"] == -32603 and bool(data.get("retryable"))
        result = message.get("result") or {}
        if result.get("isError"):
            return bool((result.get("_meta") or {}).get("dev.mcpkit/error", {}).get("retryable"))
    return True


def modern(method: str, params: dict[str, Any], rid: int) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    name = params.get("name") or params.get("taskId")
    return (jsonrpc(method, {**params, "_meta": meta}, rid),
            {"mcp-protocol-version": MODERN, "mcp-method": method, "mcp-name": name})


async def post_modern(client: Any, method: str, params: dict[str, Any], rid: int) -> tuple[int, Any]:
    message, headers = modern(method, params, rid)
    reply = await client.driver.open("POST", "/mcp", {**client.headers(), **headers}, json.dumps(message).encode())
    body = await asyncio.wait_for(reply.read(), 15)
    return reply.status, (json.loads(body) if reply.status == 200 else body)


@pytest.mark.req("HL-17")
@pytest.mark.asyncio
async def test_a_master_killed_fails_over_to_its_replica_and_every_session_carries_on(cluster, clients):
    from redis.cluster import RedisCluster

    from mcpkit.stores.redis_base import cluster_url as split

    admin = RedisCluster.from_url(split(cluster.url)[0], socket_connect_timeout=1, socket_timeout=2)
    owner = masters(admin)
    prefix = aligned_prefix(owner)
    env = {"MCPKIT_STORE": f"{cluster.url}&prefix={prefix}", "MCPKIT_STATE_KEY": secrets.token_hex(32)}
    started = [start_server(APP, env=env) for _ in range(2)]
    try:
        [(proc_a, port_a), (proc_b, port_b)] = started
        victim = bus_node(admin, prefix)
        assert victim == owner[slot(f"{prefix}{RATE_KEY}")]
        # sessions opened on A until one lives on the victim's slots, with B in each one too;
        # each has a GET stream on B and a subscription made on B
        sessions: list[tuple[Any, Any, Any]] = []
        for _ in range(24):
            a, b, stream = await listening(clients, port_b, port_a)
            sessions.append((a, b, stream))
            if owner[slot(a.session_id)] == victim and len(sessions) >= 3:
                break
        assert any(owner[slot(a.session_id)] == victim for a, _, _ in sessions)
        # the rate limit counted twice, on either process
        for client in (sessions[0][0], sessions[0][1]):
            assert not (await client.tool("scarce", {})).get("isError")
        assert admin.exists(f"{prefix}{RATE_KEY}") == 1
        host, _, port = victim.partition(":")
        node = admin.get_node(host=host, port=int(port))
        # a task running on A
        tasker = clients.tcp(port_a)
        tasker.revision = MODERN
        status, created = await post_modern(tasker, "tools/call", {"name": "job", "arguments": {"seconds": 4}}, 1)
        assert status == 200, created
        task_id = created["result"]["taskId"]
        # what the victim holds is on its replica too (replication is asynchronous)
        admin.wait(1, 1000, target_nodes=node)

        os.kill(cluster.pid(int(port)), signal.SIGKILL)
        killed = time.monotonic()

        # during the failover every request is answered, served or refused as retryable; until
        # every session is served on both processes, its answer's events stored again
        served_everywhere = False
        while not served_everywhere:
            assert time.monotonic() - killed < FAILOVER, "a session not served on both processes after the failover"
            served_everywhere = True
            for a, b, _ in sessions:
                for client in (a, b):
                    add = jsonrpc("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, client.next_id())
                    status, body = await answered(client, add)
                    assert retryable_or_served(status, body), (status, body)
                    served_everywhere &= status == 200 and b'"isError":true' not in body and stored(body)
            if not served_everywhere:
                await asyncio.sleep(0.2)

        # notifications published after it reach every GET stream (B's bus moved with the master)
        await _bus_back(proc_a, proc_b)
        assert (await sessions[0][0].tool("touch", {"uri": "note://shared"}))
        for _, b, stream in sessions:
            await notified(b, stream, "notifications/resources/updated", {"uri": "note://shared"}, FAILOVER)
        assert (await sessions[0][0].tool("grow", {"name": "after"}))
        for _, b, stream in sessions:
            await notified(b, stream, "notifications/tools/list_changed", within=FAILOVER)

        # the task ends, completed or failed, as seen from either process
        final = None
        while final is None:
            assert time.monotonic() - killed < FAILOVER * 2, "the task never reached a final state"
            for client in (tasker, clients.tcp(port_b)):
                client.revision = MODERN
                status, polled = await post_modern(client, "tasks/get", {"taskId": task_id}, 2)
                if status == 200 and polled.get("result", {}).get("status") in ("completed", "failed", "cancelled"):
                    final = polled["result"]["status"]
            await asyncio.sleep(0.2)

        # the rate limit still counts the two calls made before the failover
        a, b, _ = sessions[0]
        outcomes = [bool((await client.tool("scarce", {})).get("isError")) for client in (b, a)]
        assert outcomes == [False, True]
    finally:
        admin.close()
        for proc, _ in started:
            stderr = stop_server(proc)
            assert "Traceback" not in stderr, stderr


async def _bus_back(*procs: Any) -> None:
    """Each process's bus, if it lost its connection with the master, says it is back."""
    deadline = time.monotonic() + FAILOVER
    while not all(BUS_LOST not in stderr_of(p) or BUS_BACK in stderr_of(p) for p in procs):
        assert time.monotonic() < deadline, f"a bus never subscribed again after the failover ({FAILOVER} s)"
        await asyncio.sleep(0.1)


def test_a_cluster_that_cannot_serve_every_slot_is_unavailable_not_an_error(cluster):
    """A master and its replica both gone: the cluster refuses every command (CLUSTERDOWN), for
    the slots of the masters left too. The stores say so as they say Redis is unreachable
    (StoreUnavailable: 503 and Retry-After, a retryable error), not with redis-py's own error,
    which escaped as a traceback (as in the task lease thread during a failover)."""
    from redis.cluster import RedisCluster

    from mcpkit.stores.redis_base import StoreUnavailable, cluster_url
    from mcpkit.stores.redis_rates import RedisRateStore
    from mcpkit.stores.redis_sessions import RedisSessionStore

    admin = RedisCluster.from_url(cluster_url(cluster.url)[0], socket_connect_timeout=1, socket_timeout=2)
    owner = masters(admin)
    rates, sessions = RedisRateStore(cluster.url, prefix="d:"), RedisSessionStore(cluster.url, prefix="d:")
    try:
        victim = owner[0]
        replicas = [name for name, node in admin.cluster_nodes().items()
                    if "slave" in node["flags"] and node["master_id"] == admin.cluster_nodes()[victim]["node_id"]]
        assert len(replicas) == 1, replicas
        # a key on another master, which stays up
        key = next(f"k{n}" for n in range(1000) if owner[slot(rates.key(f"k{n}"))] != victim)
        session = next(f"s{n}" for n in range(1000) if owner[slot(sessions.key(f"s{n}"))] != victim)
        assert rates.take(key, 3, 1, 0) == 0
        for name in (victim, *replicas):
            os.kill(cluster.pid(int(name.rpartition(":")[2])), signal.SIGKILL)
        deadline = time.monotonic() + FAILOVER
        refused = set()
        while refused != {"rates", "sessions"}:  # the cluster marks the slots down after the node timeout (2 s)
            assert time.monotonic() < deadline, f"only {refused} refused within {FAILOVER} s"
            calls = (("rates", lambda: rates.take(key, 3, 1, 0)), ("sessions", lambda: sessions.load(session)))
            for what, call in calls:
                try:
                    call()
                except StoreUnavailable:
                    refused.add(what)
            time.sleep(0.1)
    finally:
        rates.close()
        sessions.close()
        admin.close()


def test_the_bus_subscribes_again_on_the_replica_that_took_over(cluster):
    """The bus listens on the master of its channel's slot. Killed, its replica takes the slot
    over: the listener must learn so (redis-py re-reads the slots for commands only) and hear
    what is published after the failover, rather than retry the dead node for ever."""
    import threading

    from redis.cluster import RedisCluster

    from mcpkit.stores.redis_base import cluster_url
    from mcpkit.stores.redis_bus import RedisBus

    admin = RedisCluster.from_url(cluster_url(cluster.url)[0], socket_connect_timeout=1, socket_timeout=2)
    # two processes' buses (origins of their own: a bus does not hear its own process)
    listener = RedisBus(cluster.url, prefix="m:", origin="listener")
    publisher = RedisBus(cluster.url, prefix="m:", origin="publisher")
    heard: list[dict[str, Any]] = []
    arrived = threading.Event()
    back = threading.Event()
    try:
        listener.subscribe("news", lambda message: (heard.append(message), arrived.set()))
        listener.watch(lambda connected: back.set() if connected else None)
        victim = masters(admin)[slot(listener.channel_key("news"))]
        assert admin.pubsub_numsub(listener.channel_key("news"),
                                   target_nodes=admin.get_node(node_name=victim)) == [(b"m:bus:news", 1)]
        os.kill(cluster.pid(int(victim.rpartition(":")[2])), signal.SIGKILL)
        assert back.wait(FAILOVER), f"the bus did not subscribe again within {FAILOVER} s of the failover"
        deadline = time.monotonic() + FAILOVER
        while not arrived.is_set():  # published until heard: what is published before it is back is lost
            assert time.monotonic() < deadline, "nothing published after the failover was heard"
            try:
                publisher.publish("news", {"n": 1})
            except Exception:  # noqa: BLE001 - the publisher's own cluster client may not have moved yet
                pass
            arrived.wait(0.2)
        assert heard[0]["n"] == 1
    finally:
        listener.close()
        publisher.close()
        admin.close()
