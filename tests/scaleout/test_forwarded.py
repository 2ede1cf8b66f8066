"""Behind the shipped HAProxy (tools/haproxy.py), every client is itself: two processes on one
Redis, served with ``--forwarded-allow-ips 127.0.0.1`` (the balancer's address), count each
client by the address HAProxy's ``option forwardfor`` names, not as the balancer's one address.
Clients are told apart by binding their sockets to distinct loopback addresses (127.0.0.2,
127.0.0.3), as distinct machines would be. And with one backend killed, requests go to the
live one at once rather than waiting on the dead one and getting 503."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from tests.scaleout.balancer import behind_haproxy, stop_all
from tests.test_http import jsonrpc
from tools.haproxy import HAProxy

QUOTA = 4  # --max-sessions-per-client


@pytest.fixture(scope="module")
def balanced(redis_url: str) -> Iterator[tuple[int, list[int]]]:
    """(balancer port, backend ports): two processes trusting the balancer's address."""
    proxy, started = behind_haproxy(redis_url, 2, "--forwarded-allow-ips", "127.0.0.1",
                                    "--max-sessions-per-client", str(QUOTA))
    try:
        yield proxy.port, [port for _, port in started]
    finally:
        stderr = stop_all(proxy, started)
        assert "Traceback" not in stderr, stderr


async def _sessions(clients: Any, port: int, source: str, count: int, **headers: str) -> list[Any]:
    """``count`` sessions of the client at ``source``, opened one after another."""
    made = [clients.tcp(port, source=source) for _ in range(count)]
    for client in made:
        await client.initialize(**headers)
    return made


async def _alive(client: Any) -> bool:
    """Whether the client's session still answers (404 once it has been ended)."""
    reply = await client.post(jsonrpc("ping", {}, client.next_id()))
    await reply.read()
    assert reply.status in (200, 404), reply.status
    return reply.status == 200


@pytest.mark.asyncio
async def test_behind_the_balancer_one_clients_flood_never_ends_anothers_sessions(balanced, clients):
    port, _ = balanced
    victims = await _sessions(clients, port, "127.0.0.2", QUOTA - 1)
    flood = await _sessions(clients, port, "127.0.0.3", 3 * QUOTA)
    # the flooder's quota is its own: its oldest sessions made room for its newest...
    assert [await _alive(c) for c in flood] == [False] * (2 * QUOTA) + [True] * QUOTA
    # ...and every session of the other client, on either process, is untouched
    assert [await _alive(v) for v in victims] == [True] * (QUOTA - 1)


@pytest.mark.asyncio
async def test_a_forged_x_forwarded_for_from_an_untrusted_peer_changes_nothing(balanced, clients):
    port, backends = balanced
    victims = await _sessions(clients, port, "127.0.0.4", QUOTA - 1)
    # straight to a backend from 127.0.0.5 (not the balancer), claiming to be the victim
    forger = await _sessions(clients, backends[0], "127.0.0.5", 2 * QUOTA, x_forwarded_for="127.0.0.4")
    assert [await _alive(v) for v in victims] == [True] * (QUOTA - 1)
    # counted as itself: its own quota ended its own oldest sessions
    assert [await _alive(c) for c in forger] == [False] * QUOTA + [True] * QUOTA


@pytest.mark.asyncio
async def test_behind_the_balancer_each_client_has_its_own_rate_budget(balanced, clients):
    port, _ = balanced
    spender, other = clients.tcp(port, source="127.0.0.6"), clients.tcp(port, source="127.0.0.7")
    for client in (spender, other):
        await client.initialize()

    async def refused(client: Any) -> bool:
        return bool((await client.tool("scarce", {})).get("isError"))

    # scarce: 3/min for each caller, anonymous@ADDRESS, whichever process answers
    assert [await refused(spender) for _ in range(5)] == [False] * 3 + [True] * 2
    assert [await refused(other) for _ in range(3)] == [False] * 3


@pytest_asyncio.fixture
async def one_killed(redis_url: str, clients: Any) -> AsyncIterator[tuple[HAProxy, Any]]:
    """(the balancer, a client's session opened through it) once the first of its two
    processes (``s0``) has been killed with SIGKILL."""
    proxy, started = behind_haproxy(redis_url, 2)
    try:
        client = clients.tcp(proxy.port)
        await client.initialize()
        assert (await client.tool("add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        dead, _ = started[0]
        dead.send_signal(signal.SIGKILL)
        dead.wait(10)
        yield proxy, client
    finally:
        stop_all(proxy, started)


@pytest.mark.asyncio
async def test_with_one_backend_killed_requests_go_to_the_live_one(one_killed):
    _, client = one_killed
    # at once, before any health check has seen it: round robin sends every other request to
    # the dead port; each is sent on to the live process, none waits out the retries
    for n in range(6):
        began = time.monotonic()
        reply = await client.post(jsonrpc("tools/call", {"name": "add", "arguments": {"a": n, "b": 1}},
                                          client.next_id()))
        [answer] = await client.messages(reply)
        assert reply.status == 200, reply.status
        assert answer["result"]["structuredContent"] == {"result": n + 1}
        assert time.monotonic() - began < 2.0  # retried on the dead one: 1 s per retry, 503 after 3 s


@pytest.mark.asyncio
async def test_a_killed_backend_is_taken_out_by_the_health_check(one_killed):
    proxy, _ = one_killed
    deadline = time.monotonic() + 10
    while "DOWN" not in proxy.state("s0"):  # checked every second (tools/haproxy.py)
        assert time.monotonic() < deadline, proxy.state("s0")
        await asyncio.sleep(0.1)
    assert "UP" in proxy.state("s1")
