"""Redis going away under two `mcpkit serve --http` processes: a session ended stays ended on
every process, and after Redis comes back every process gives the same answer for every session.

Each test runs a redis-server of its own, which it stops and starts again on the same port, so
nothing here touches the Redis the other scale-out tests share. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.stores.conftest import REDIS_SERVER, RedisProcess, _missing
from tests.test_http import jsonrpc, start_server, stop_server

APP = str(Path(__file__).resolve().parent / "app.py")
DEADLINE = 15.0  # a hang guard, never a performance bound
BUS_BACK = "Redis bus: connection back"

pytestmark = pytest.mark.reliability


@pytest.fixture
def redis_factory(tmp_path: Path) -> Iterator[Callable[[bool], RedisProcess]]:
    """Start a redis-server of this test's own: with an append-only file (durable) or none."""
    if REDIS_SERVER is None:
        _missing("these tests stop and start a redis-server of their own: install redis-server")
    pytest.importorskip("redis")
    made: list[RedisProcess] = []

    def make(durable: bool) -> RedisProcess:
        server = RedisProcess(aof_dir=str(tmp_path) if durable else None)
        server.start()
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()


@contextmanager
def processes(redis: RedisProcess, *extra: str, count: int = 2) -> Iterator[list[Any]]:
    """``count`` processes of tests/scaleout/app.py on ``redis``; each one's stderr is checked
    for tracebacks at the end."""
    env = {"MCPKIT_STORE": f"{redis.url}?prefix=o{secrets.token_hex(4)}:", "MCPKIT_STATE_KEY": secrets.token_hex(32)}
    started: list[Any] = []
    try:
        for _ in range(count):
            started.append(start_server(APP, *extra, env=env))
        yield started
    finally:
        for proc, _ in started:
            stderr = stop_server(proc)
            assert "Traceback" not in stderr, stderr


def stderr_of(proc: Any) -> str:
    """What a running server wrote to stderr so far (pread: its file offset is left alone)."""
    return os.pread(proc.errlog.fileno(), 1 << 22, 0).decode(errors="replace")


async def until(condition: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while True:
        outcome = condition()
        if not isinstance(outcome, bool):
            outcome = await outcome
        if outcome:
            return
        assert time.monotonic() < deadline, f"not within {DEADLINE} s: {what}"
        await asyncio.sleep(0.05)


async def status(client: Any) -> int:
    """What a process answers a plain request of the client's session (200 served, 404 gone)."""
    reply = await client.post(jsonrpc("tools/list", {}, client.next_id()))
    await reply.read()
    return reply.status


def joined(clients: Any, port: int, other: Any) -> Any:
    """A client of ``port`` in ``other``'s session."""
    client = clients.tcp(port)
    client.session_id, client.revision = other.session_id, other.revision
    return client


async def listening(clients: Any, port: int, other_port: int, *, by_opener: bool = False) -> tuple[Any, Any, Any]:
    """A session opened on ``other_port``, listening (GET) on ``port``, subscribed to
    note://shared on ``port`` (or, ``by_opener``, on ``other_port``): (opener, listener, stream)."""
    opener = clients.tcp(other_port)
    await opener.initialize()
    client = joined(clients, port, opener)
    await (opener if by_opener else client).result("resources/subscribe", {"uri": "note://shared"})
    stream = await client.get()
    assert stream.status == 200
    return opener, client, stream


async def first_update(client: Any, stream: Any) -> str:
    """The URI of the next resource update on a stream (bounded; the stream must not end)."""
    while True:
        event = await stream.next_event(timeout=DEADLINE)
        assert event is not None, "the stream ended"
        message = client.event_message(event)
        if message is not None and message.get("method") == "notifications/resources/updated":
            return message["params"]["uri"]


async def ended(stream: Any) -> None:
    """Read an SSE stream until the server ends it."""
    while await stream.next_event(timeout=DEADLINE) is not None:
        pass


@pytest.mark.req("HL-18", "HL-17")
@pytest.mark.asyncio
async def test_a_session_deleted_while_redis_is_down_is_never_served_again(redis_factory, clients):
    redis = redis_factory(True)  # its record survives the restart, as with any persistence
    with processes(redis) as [(_, port_a), (proc_b, port_b)]:
        a = clients.tcp(port_a)
        await a.initialize()
        b = joined(clients, port_b, a)
        assert (await b.tool("add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}  # B holds a copy
        stream = await b.get()  # and an open stream of it
        assert stream.status == 200

        redis.stop()
        refused = await a.delete()
        # the end cannot be recorded: refused, retryable, and the session is not ended anywhere
        assert refused.status == 503, (refused.status, await refused.read())
        assert int(refused.headers["retry-after"]) >= 1
        assert await status(b) == 200 and await status(a) == 200
        # nor can a new session be shared while the store is down
        newcomer = clients.tcp(port_a)
        opened = await newcomer.post(jsonrpc("initialize", {
            "protocolVersion": a.revision, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, 1))
        assert opened.status == 503 and int(opened.headers["retry-after"]) >= 1

        redis.start()
        retried = await a.delete()  # as Retry-After said
        assert retried.status == 200, (retried.status, await retried.read())
        assert await status(a) == 404 and await status(b) == 404
        await ended(stream)  # B's stream of the ended session closes too
        # and once B's bus is back (it re-checks every session it holds), still ended everywhere
        await until(lambda: BUS_BACK in stderr_of(proc_b), "B's bus reconnects")
        assert await status(a) == 404 and await status(b) == 404


@pytest.mark.req("HL-17")
@pytest.mark.asyncio
@pytest.mark.parametrize("durable", [False, True], ids=["no-persistence", "aof"])
async def test_after_a_redis_restart_every_process_gives_the_same_answer(redis_factory, clients, durable):
    redis = redis_factory(durable)
    with processes(redis) as [(proc_a, port_a), (proc_b, port_b)]:
        # one session served by both processes, one held by A alone, one by B alone
        both, both_b, stream = await listening(clients, port_b, port_a, by_opener=True)
        only_a, only_b = clients.tcp(port_a), clients.tcp(port_b)
        await only_a.initialize()
        await only_b.initialize()
        sessions = {"both": both, "A's": only_a, "B's": only_b}
        ports = {"A": port_a, "B": port_b}

        redis.stop()
        redis.start()
        await until(lambda: all(BUS_BACK in stderr_of(p) for p in (proc_a, proc_b)), "both buses reconnect")
        if not durable:
            # B dropped the session Redis lost as soon as its bus was back, without waiting for
            # a request of it: the stream ends, nothing hangs
            await ended(stream)

        expected = 200 if durable else 404
        answers = {(name, where): await status(joined(clients, port, client))
                   for name, client in sessions.items() for where, port in ports.items()}
        assert answers == {key: expected for key in answers}
        if durable:
            # served as before, notifications included: B's stream hears an update made on A
            assert await both.tool("touch", {"uri": "note://shared"})
            assert await first_update(both_b, stream) == "note://shared"
            assert (await both.delete()).status == 200
            await ended(stream)
        else:
            again = clients.tcp(port_b)
            await again.initialize()  # and a client starts over cleanly, on any process
            assert (await joined(clients, port_a, again).tool("add", {"a": 2, "b": 2}))["structuredContent"] == {"result": 4}


@pytest.mark.asyncio
async def test_a_session_idle_on_one_process_lives_on_while_another_serves_it(redis_factory, clients):
    """The idle timeout ends a session nobody uses: used on B, it is not A's to end."""
    redis = redis_factory(False)
    with processes(redis, "--session-idle-timeout", "2") as [(_, port_a), (_, port_b)]:
        a = clients.tcp(port_a)
        await a.initialize()
        b = joined(clients, port_b, a)
        started = time.monotonic()
        while time.monotonic() - started < 3.0:  # past the timeout, A idle all along
            assert (await b.tool("add", {"a": 1, "b": 1}))["structuredContent"] == {"result": 2}
            await asyncio.sleep(0.25)
        assert await status(a) == 200 and await status(b) == 200


@pytest.mark.req("HL-18")
@pytest.mark.asyncio
async def test_a_session_ended_before_a_process_bus_is_back_is_not_served_there(redis_factory, clients):
    """Redis back, B's bus not yet: an end recorded (and announced) then is news B cannot hear,
    so B checks the store each time it serves a copy until its bus is back."""
    redis = redis_factory(True)
    with processes(redis) as [(_, port_a), (proc_b, port_b)]:
        a = clients.tcp(port_a)
        await a.initialize()
        b = joined(clients, port_b, a)
        assert await status(b) == 200  # B holds a copy
        redis.stop()
        await until(lambda: "Redis bus: connection lost" in stderr_of(proc_b), "B's bus notices")
        await asyncio.sleep(3.5)  # B's bus retries back off to every 2 s: it misses Redis's return a while
        redis.start()
        assert await status(b) == 200  # checked against the store: alive
        assert (await a.delete()).status == 200  # ended, and announced while B's bus is away
        served = await status(b)
        assert BUS_BACK not in stderr_of(proc_b), "B's bus came back too soon for this test to tell"
        assert served == 404


@pytest.mark.req("RS-10")
@pytest.mark.asyncio
async def test_an_update_published_while_a_process_bus_was_away_still_reaches_its_streams(redis_factory, clients):
    """Published on A after Redis came back but before B's bus did: B never receives it, so
    once back B tells its subscribers that what they subscribed to may have changed."""
    redis = redis_factory(True)
    with processes(redis) as [(_, port_a), (proc_b, port_b)]:
        a = clients.tcp(port_a)
        await a.initialize()
        b = joined(clients, port_b, a)
        await b.result("resources/subscribe", {"uri": "note://shared"})
        stream = await b.get()
        assert stream.status == 200
        redis.stop()
        await until(lambda: "Redis bus: connection lost" in stderr_of(proc_b), "B's bus notices")
        await asyncio.sleep(3.5)  # B's bus retries back off to every 2 s: it misses Redis's return a while
        redis.start()
        await a.tool("touch", {"uri": "note://shared/1"})
        assert BUS_BACK not in stderr_of(proc_b), "B's bus came back too soon for this test to tell"
        assert await first_update(b, stream) in ("note://shared", "note://shared/1")
        assert (await a.delete()).status == 200
        await ended(stream)
