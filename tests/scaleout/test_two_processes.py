"""Two `mcpkit serve --http` processes on one Redis (MCPKIT_STORE) serve one client's session,
its requests alternating between them: calls, progress, resumption, subscriptions, a global
rate limit, and tasks started on one process and polled on the other."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import mcpkit_command
from tests.stores.conftest import REDIS_SERVER, RedisProcess
from tests.test_http import call, free_port, init_params, jsonrpc, start_server, stop_server, wait_listening

APP = str(Path(__file__).resolve().parent / "app.py")
MODERN = "2026-07-28"


@contextlib.contextmanager
def processes(redis_url: str, count: int = 2, query: str = "") -> Iterator[list[tuple[subprocess.Popen[bytes], int]]]:
    """``count`` processes of tests/scaleout/app.py sharing one Redis under a prefix of their
    own, and their ports; stopped at the end, and none may have printed a traceback. ``query``:
    more of MCPKIT_STORE's arguments (``&task_lease=1``)."""
    env = {"MCPKIT_STORE": f"{redis_url}?prefix=t{secrets.token_hex(4)}:{query}",
           "MCPKIT_STATE_KEY": secrets.token_hex(32)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    started = []
    try:
        for _ in range(count):
            started.append(start_server(APP))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        yield started
    finally:
        for proc, _ in started:
            stderr = stop_server(proc)
            assert "Traceback" not in stderr, stderr


@pytest.fixture(scope="module")
def two(redis_url: str) -> Iterator[tuple[int, int]]:
    """Two processes on one Redis, for the whole module."""
    with processes(redis_url) as started:
        yield started[0][1], started[1][1]


def pair(clients: Any, ports: tuple[int, int]) -> tuple[Any, Any]:
    return clients.tcp(ports[0]), clients.tcp(ports[1])


async def joined(a: Any, b: Any) -> None:
    """Initialize on A; B then talks in the same session."""
    await a.initialize()
    b.session_id, b.revision = a.session_id, a.revision


@pytest.mark.asyncio
async def test_one_session_alternates_between_two_processes(two, clients):
    a, b = pair(clients, two)
    await joined(a, b)
    for i, client in enumerate((b, a, b, a)):
        result = await client.tool("add", {"a": i, "b": 10})
        assert result["structuredContent"] == {"result": i + 10}
    # progress on a process that did not open the session
    reply = await b.post(call("count", {"steps": 3}, id=77, token="p"))
    messages = await b.messages(reply)
    assert [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"] == [1, 2, 3]
    assert messages[-1]["result"]["content"] == [{"type": "text", "text": "counted 3"}]
    # an ended session is gone on both
    assert (await a.delete()).status == 200
    assert (await b.post(jsonrpc("tools/list", {}, 5))).status == 404


@pytest.mark.req("RS-10")
@pytest.mark.asyncio
async def test_the_copy_that_opened_a_session_hears_of_changes_made_after_initialized_went_elsewhere(two, clients):
    """A balancer sends initialize to A and notifications/initialized to B: A's copy must still
    take the session's later changes (here a subscription made on B), not take its own stale
    ``initialized`` for a change of its own and ignore the store from then on."""
    a, b = pair(clients, two)
    reply = await a.post(jsonrpc("initialize", init_params(a.offered), a.next_id()))
    a.session_id, a.revision = reply.headers["mcp-session-id"], a.offered
    await a.messages(reply)
    b.session_id, b.revision = a.session_id, a.revision
    assert (await b.post(jsonrpc("notifications/initialized"))).status == 202
    await b.result("resources/subscribe", {"uri": "note://shared"})
    stream = await a.get()
    assert stream.status == 200
    await b.tool("touch", {"uri": "note://shared"})
    deadline = time.monotonic() + 10
    while True:
        assert time.monotonic() < deadline, "A's stream never received the update"
        event = await stream.next_event()
        message = a.event_message(event) if event is not None and event.data else None
        if message and message.get("method") == "notifications/resources/updated":
            assert message["params"] == {"uri": "note://shared"}
            break
    await stream.disconnect()


@pytest.mark.asyncio
async def test_a_rate_limit_is_global(two, clients):
    a, b = pair(clients, two)
    await joined(a, b)
    outcomes = []
    for client in (a, b, a, b):
        result = await client.tool("scarce", {})
        outcomes.append(bool(result.get("isError")))
    assert outcomes == [False, False, False, True]  # 3/min across both processes


@pytest.mark.asyncio
async def test_a_stream_dropped_on_one_process_resumes_on_the_other(two, clients):
    a, b = pair(clients, two)
    await joined(a, b)
    reply = await a.post(call("count", {"steps": 6}, id=90, token="r"))
    priming = await reply.next_event()
    first = await reply.next_event()
    assert a.event_message(first)["params"]["progress"] == 1
    await reply.disconnect()
    await asyncio.sleep(0.6)  # the call finishes on A meanwhile; its events are in Redis
    resumed = await b.get(last_event_id=first.id)
    assert resumed.status == 200
    messages = [b.event_message(e) for e in await resumed.events()]
    messages = [m for m in messages if m is not None]
    assert [m["params"]["progress"] for m in messages if m.get("method")] == [2, 3, 4, 5, 6]
    assert messages[-1] == {"jsonrpc": "2.0", "id": 90, "result": {"content": [{"type": "text", "text": "counted 6"}]}}
    assert priming.id.rpartition("_")[0] == first.id.rpartition("_")[0]


@pytest.mark.req("HL-14")
@pytest.mark.asyncio
async def test_two_processes_never_mint_the_same_stream_id_for_one_session(two, clients):
    a, b = pair(clients, two)
    await joined(a, b)
    streams = set()
    for client, rid in ((a, 301), (b, 302), (a, 303), (b, 304)):
        reply = await client.post(call("count", {"steps": 1}, id=rid, token=f"t{rid}"))
        event = await reply.next_event()
        streams.add(event.id.rpartition("_")[0])
        await reply.disconnect()
    assert len(streams) == 4  # each POST's stream is its own, whichever process minted it


@pytest.mark.asyncio
async def test_a_resource_update_on_one_process_reaches_a_stream_on_the_other(two, clients):
    a, b = pair(clients, two)
    await joined(a, b)
    stream = await b.get()
    assert stream.status == 200
    await a.result("resources/subscribe", {"uri": "note://shared"})
    assert await a.tool("touch", {"uri": "note://shared"})
    seen = None
    deadline = time.monotonic() + 10
    while seen is None and time.monotonic() < deadline:
        event = await stream.next_event(timeout=10)
        message = b.event_message(event) if event is not None else None
        if message and message.get("method") == "notifications/resources/updated":
            seen = message
    assert seen == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "note://shared"}}
    await stream.disconnect()


@pytest.mark.asyncio
async def test_a_batch_of_changes_on_one_process_is_one_list_changed_per_list_on_the_other(two, clients):
    a, b = pair(clients, two)
    await joined(a, b)
    stream = await b.get()
    assert stream.status == 200
    assert await a.tool("grow", {"name": "x"})
    seen: list[str] = []
    wait = 10.0  # for the first; then a second more for any that should not come
    while True:
        try:
            event = await stream.next_event(timeout=wait if len(seen) < 2 else 1.0)
        except TimeoutError:
            break
        message = b.event_message(event) if event is not None else None
        if message and message.get("method", "").endswith("/list_changed"):
            seen.append(message["method"])
    assert sorted(seen) == ["notifications/resources/list_changed", "notifications/tools/list_changed"]
    await stream.disconnect()


def modern(method: str, params: dict[str, Any], rid: int) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    return jsonrpc(method, {**params, "_meta": meta}, rid)


async def post_modern(client: Any, message: dict[str, Any]) -> dict[str, Any]:
    params = message["params"]
    name = params.get("name") or params.get("taskId")
    headers = {"mcp-protocol-version": MODERN, "mcp-method": message["method"], "mcp-name": name}
    reply = await client.driver.open("POST", "/mcp", {**client.headers(), **headers}, json.dumps(message).encode())
    [answer] = await client.messages(reply)
    return answer


@pytest.mark.asyncio
async def test_a_task_started_on_one_process_is_polled_on_the_other(two, clients, wire):
    a, b = pair(clients, two)
    for client in (a, b):
        client.revision = MODERN
    created = await post_modern(a, modern("tools/call", {"name": "job", "arguments": {"seconds": 0.3}}, 1))
    task_id = created["result"]["taskId"]
    status = None
    deadline = time.monotonic() + 10
    while status != "completed" and time.monotonic() < deadline:
        polled = await post_modern(b, modern("tasks/get", {"taskId": task_id}, 2))
        status = polled["result"]["status"]
        await asyncio.sleep(0.1)
    assert status == "completed"
    assert polled["result"]["result"]["content"] == [{"type": "text", "text": "done after 0.3 s"}]


@pytest.mark.reliability
@pytest.mark.asyncio
async def test_redis_going_away_gives_clear_errors_and_service_resumes_when_it_is_back(clients):
    """Its own Redis, stopped and restarted mid-test, under one server process."""
    if REDIS_SERVER is None:
        pytest.skip("needs redis-server to stop and restart it")
    redis = RedisProcess()
    port = redis.port

    redis.start()
    saved = os.environ.get("MCPKIT_STORE")
    os.environ["MCPKIT_STORE"] = f"redis://127.0.0.1:{port}/0"
    try:
        server, server_port = start_server(APP)
    finally:
        if saved is None:
            os.environ.pop("MCPKIT_STORE", None)
        else:
            os.environ["MCPKIT_STORE"] = saved
    try:
        client = clients.tcp(server_port)
        await client.initialize()
        assert not (await client.tool("scarce", {})).get("isError")
        redis.stop()
        # while Redis is down: the session this process holds is still served; what needs the
        # store gets a clear, quick refusal: the rate-limited tool, and a session held elsewhere
        started = time.monotonic()
        assert (await client.tool("add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        limited = await client.tool("scarce", {})
        assert limited["isError"] is True and limited["_meta"]["dev.mcpkit/error"]["code"] == "E_NOT_CONNECTED"
        stranger = clients.tcp(server_port)
        stranger.session_id, stranger.revision = "0" * 32, client.revision
        down = await stranger.post(jsonrpc("tools/list", {}, 51))
        assert down.status == 503
        assert "session store is unavailable" in (await down.read()).decode()
        assert time.monotonic() - started < 15
        # back (empty: its sessions are gone, as after any Redis loss): a new session works
        redis.start()
        fresh = clients.tcp(server_port)
        await fresh.initialize()
        assert (await fresh.tool("add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        assert not (await fresh.tool("scarce", {})).get("isError")
    finally:
        stderr = stop_server(server)
        redis.stop()
    assert "Traceback" not in stderr, stderr


@pytest.mark.reliability
@pytest.mark.asyncio
async def test_sigterm_lets_the_call_in_flight_finish(clients):
    """Graceful shutdown: the answer of a call running when SIGTERM arrives still goes out."""
    import signal

    server, port = start_server()
    try:
        client = clients.tcp(port)
        await client.initialize()
        reply = await client.post(call("sleep", {"seconds": 1.5}, id=31))
        await asyncio.sleep(0.3)
        server.send_signal(signal.SIGTERM)
        [answer] = await client.messages(reply)
        assert answer == {"jsonrpc": "2.0", "id": 31, "result": {"content": [{"type": "text", "text": "Slept 1.5 s"}]}}
        # then it exits promptly (uvicorn re-raises the signal it handled: -SIGTERM)
        assert server.wait(15) in (0, -signal.SIGTERM)
    finally:
        stderr = stop_server(server)
    assert "Traceback" not in stderr, stderr


@pytest.mark.asyncio
async def test_workers_share_one_port_through_redis(redis_url, clients):
    port = free_port()
    env = {**os.environ, "MCPKIT_STORE": f"{redis_url}?prefix=w{secrets.token_hex(4)}:"}
    proc = subprocess.Popen(
        mcpkit_command("serve", APP, "--http", f"127.0.0.1:{port}", "--workers", "2"),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        wait_listening(proc, port)  # type: ignore[arg-type]
        client = clients.tcp(port)
        await client.initialize()
        results = [(await client.tool("add", {"a": i, "b": 1}))["structuredContent"] for i in range(6)]
        assert results == [{"result": i + 1} for i in range(6)]
        outcomes = [bool((await client.tool("scarce", {})).get("isError")) for _ in range(4)]
        assert outcomes == [False, False, False, True]
    finally:
        proc.terminate()
        proc.wait(20)


def test_workers_without_a_shared_store_are_refused():
    env = {k: v for k, v in os.environ.items() if k != "MCPKIT_STORE"}
    done = subprocess.run(mcpkit_command("serve", APP, "--http", "127.0.0.1:0", "--workers", "2"),
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and "--workers needs MCPKIT_STORE" in done.stderr
