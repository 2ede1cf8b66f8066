"""HAProxy in front of several `mcpkit serve --http` processes with no session affinity: each
request of one session may land on any process. On one Redis with two processes, and on a
Redis Cluster of three masters with four: every request is answered exactly once, a dropped
stream resumes through the balancer, rate limits hold across processes, and the requests really
do spread over the processes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.scaleout.balancer import behind_haproxy, stop_all
from tests.test_http import call


@pytest.fixture(scope="module", params=[("redis", 2), ("cluster", 4)], ids=["redis-2", "cluster-4"])
def balanced(request: pytest.FixtureRequest) -> Iterator[tuple[int, int]]:
    """(balancer port, number of processes): N processes of app.py on one store, behind HAProxy."""
    store, count = request.param
    url = request.getfixturevalue("redis_url" if store == "redis" else "cluster_url")
    # the balancer (127.0.0.1) names each client in X-Forwarded-For (tools/haproxy.py)
    proxy, started = behind_haproxy(url, count, "--forwarded-allow-ips", "127.0.0.1")
    try:
        yield proxy.port, count
    finally:
        stderr = stop_all(proxy, started)
        assert "Traceback" not in stderr, stderr


@pytest.mark.asyncio
async def test_every_request_is_answered_once_and_they_spread_over_the_processes(balanced, clients):
    port, count = balanced
    client = clients.tcp(port)
    await client.initialize()
    for i in range(8 * count):
        result = await client.tool("add", {"a": i, "b": 1000})
        assert result["structuredContent"] == {"result": i + 1000}
    # whoami alone, back to back (interleaved with add, round robin could send every whoami to
    # the same process)
    pids = {(await client.tool("whoami", {}))["structuredContent"]["result"] for _ in range(2 * count)}
    assert len(pids) == count  # round robin, no affinity: every process served the session


@pytest.mark.asyncio
async def test_concurrent_sessions_each_get_their_own_answers(balanced, clients):
    port, _ = balanced

    async def one(n: int) -> list[int]:
        client = clients.tcp(port)
        await client.initialize()
        return [(await client.tool("add", {"a": n, "b": k}))["structuredContent"]["result"] for k in range(10)]

    results = await asyncio.gather(*(one(n * 100) for n in range(6)))
    assert results == [[n * 100 + k for k in range(10)] for n in range(6)]


@pytest.mark.asyncio
async def test_a_dropped_stream_resumes_through_the_balancer(balanced, clients):
    port, _ = balanced
    client = clients.tcp(port)
    await client.initialize()
    reply = await client.post(call("count", {"steps": 6}, id=90, token="r"))
    await reply.next_event()  # priming event
    first = await reply.next_event()
    assert client.event_message(first)["params"]["progress"] == 1
    await reply.disconnect()
    await asyncio.sleep(0.6)  # the call finishes meanwhile; its events are in the store
    resumed = await client.get(last_event_id=first.id)  # lands on whichever process is next
    assert resumed.status == 200
    messages = [m for m in (client.event_message(e) for e in await resumed.events()) if m is not None]
    assert [m["params"]["progress"] for m in messages if m.get("method")] == [2, 3, 4, 5, 6]
    assert messages[-1]["result"]["content"] == [{"type": "text", "text": "counted 6"}]


@pytest.mark.asyncio
async def test_a_rate_limit_is_global_behind_the_balancer(balanced, clients):
    port, count = balanced
    client = clients.tcp(port)
    await client.initialize()
    outcomes = [bool((await client.tool("scarce", {})).get("isError")) for _ in range(count + 3)]
    assert outcomes == [False, False, False] + [True] * count  # 3/min whichever process answers
