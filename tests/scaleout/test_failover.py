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
    channel, whose slot picks the node the bus listens on: killing that master then moves the
    bus and fails over the bucket at once."""
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


def joined(clients: Any, port: int, other: Any) -> Any:
    client = clients.tcp(port)
    client.session_id, client.revision = other.session_id, other.revision
    return client


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


async def updated(client: Any, stream: Any, uri: str) -> None:
    """Read ``stream`` until it carries notifications/resources/updated for ``uri``."""
    deadline = time.monotonic() + FAILOVER
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no update of {uri} on the stream within {FAILOVER} s"
        event = await stream.next_event(timeout=left)
        assert event is not None, "the GET stream ended"
        message = client.event_message(event)
        if message and message.get("method") == "notifications/resources/updated" and message["params"]["uri"] == uri:
            return


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
            for what, call in (("rates", lambda: rates.take(key, 3, 1, 0)), ("sessions", lambda: sessions.load(session))):
                try:
                    call()
                except StoreUnavailable:
                    refused.add(what)
            time.sleep(0.1)
    finally:
        rates.close()
        sessions.close()
        admin.close()
