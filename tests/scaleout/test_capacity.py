"""What the shared stores cost, counted: Redis commands (INFO commandstats) and bytes per session,
per request and per notification, on a redis-server of the test's own so nothing else counts.

The counts are exact for this build and asserted as such: a change that makes a plain call touch
Redis, or a session cost more round trips, fails here and has to say why. docs/deployment.md's
capacity model is built from the table ``python -m pytest tests/scaleout/test_capacity.py -s``
prints."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path


import pytest

from tests.stores.conftest import REDIS_SERVER, RedisProcess, _missing
from tests.test_http import call, jsonrpc, start_server, stop_server

APP = str(Path(__file__).resolve().parent / "app.py")
MODERN = "2026-07-28"


class Counter:
    """Commands and network bytes a Redis served between two readings."""

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url)
        self.base_in = self.base_out = 0
        _, self.base_in, self.base_out = self.delta(self.reading())  # what the readings cost

    def reading(self) -> tuple[dict[str, int], int, int]:
        stats = self.client.info("commandstats")
        net = self.client.info("stats")
        calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
        return calls, int(net["total_net_input_bytes"]), int(net["total_net_output_bytes"])

    def delta(self, before: tuple[dict[str, int], int, int]) -> tuple[dict[str, int], int, int]:
        after = self.reading()
        calls = {k: n - before[0].get(k, 0) for k, n in after[0].items() if n - before[0].get(k, 0)}
        # the readings themselves (INFO twice) are not the server's
        calls["info"] = calls.get("info", 0) - 2
        calls = {k: n for k, n in calls.items() if n}
        return calls, after[1] - before[1] - self.base_in, after[2] - before[2] - self.base_out


@pytest.fixture(scope="module")
def measured() -> Iterator[tuple[int, int, Counter]]:
    """A redis-server of its own, and two processes on it: one SSE (resumable), one JSON."""
    if REDIS_SERVER is None:
        _missing("the capacity model counts commands on a redis-server of its own: install redis-server")
    redis = RedisProcess()
    redis.start()
    env = {"MCPKIT_STORE": f"{redis.url}?prefix=cap:", "MCPKIT_STATE_KEY": secrets.token_hex(32)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        sse, sse_port = start_server(APP)
        js, js_port = start_server(APP, "--json")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        yield sse_port, js_port, Counter(redis.url)
    finally:
        for proc in (sse, js):
            assert "Traceback" not in stop_server(proc)
        redis.stop()


ROWS: list[tuple[str, dict[str, int], int, int]] = []


def record(what: str, delta: tuple[dict[str, int], int, int]) -> dict[str, int]:
    ROWS.append((what, *delta))
    return delta[0]


def teardown_module() -> None:
    if ROWS:
        # bytes Redis received (its replies are left out: INFO's own vary in size)
        print("\n| what | Redis commands | bytes sent to Redis |\n|---|---|---|")
        for what, calls, b_in, _ in ROWS:
            text = ", ".join(f"{k} {n}" for k, n in sorted(calls.items())) or "none"
            print(f"| {what} | {text} | {b_in:,} |")


@pytest.mark.asyncio
async def test_what_a_session_and_its_requests_cost(measured, clients):
    sse_port, js_port, counter = measured
    for port, mode in ((js_port, "JSON"), (sse_port, "SSE")):
        await clients.tcp(port).initialize()  # the process's first connections to Redis: not counted
        client = clients.tcp(port)
        before = counter.reading()
        await client.initialize()
        opened = record(f"open a session ({mode}: initialize + initialized)", counter.delta(before))
        # saved (and announced to the other processes) when it opens and when it is initialized
        assert opened.get("set", 0) <= 2 and opened.get("publish", 0) <= 2

        before = counter.reading()
        for i in range(10):
            assert (await client.tool("add", {"a": i, "b": 1}))["structuredContent"] == {"result": i + 1}
        calls = record(f"10 plain tools/call ({mode})", counter.delta(before))
        if mode == "JSON":
            assert calls == {}  # a call that changes no session state costs Redis nothing
        else:
            # two resumable events a call (the priming event and the answer), one script each
            # (XREVRANGE, XADD, PEXPIRE), and the stream set to expire once delivered
            assert calls.get("evalsha", 0) == 20 and calls.get("xadd", 0) == 20
            assert 20 <= calls.get("pexpire", 0) <= 30  # the last expiry may still be on its way

        before = counter.reading()
        reply = await client.post(call("count", {"steps": 5}, id=500, token="p"))
        await client.messages(reply)
        record(f"a call with 5 progress notifications ({mode})", counter.delta(before))

        before = counter.reading()
        assert (await client.tool("scarce", {})).get("isError") is not True
        limited = record(f"a rate-limited call ({mode})", counter.delta(before))
        assert limited.get("evalsha", 0) >= 1  # one token bucket script

        before = counter.reading()
        assert (await client.delete()).status == 200
        record(f"end a session ({mode})", counter.delta(before))


@pytest.mark.asyncio
async def test_a_resource_update_is_one_publish(measured, clients):
    sse_port, _, counter = measured
    client = clients.tcp(sse_port)
    await client.initialize()
    await client.result("resources/subscribe", {"uri": "note://shared"})
    before = counter.reading()
    await client.tool("touch", {"uri": "note://shared"})
    calls = record("a resource update notification (bus)", counter.delta(before))
    assert calls.get("publish", 0) == 1


@pytest.mark.asyncio
async def test_the_2026_07_28_stateless_path_needs_no_shared_state(measured, clients):
    _, js_port, counter = measured
    client = clients.tcp(js_port)
    client.revision = MODERN
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    before = counter.reading()
    for i in range(10):
        message = jsonrpc("tools/call", {"name": "add", "arguments": {"a": i, "b": 2}, "_meta": meta}, i + 1)
        headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "add"}
        import json

        reply = await client.driver.open("POST", "/mcp", {**client.headers(), **headers}, json.dumps(message).encode())
        [answer] = await client.messages(reply)
        assert answer["result"]["structuredContent"] == {"result": i + 2}
    calls = record("10 tools/call under 2026-07-28 (no session)", counter.delta(before))
    assert calls == {}




@pytest.mark.asyncio
async def test_tasks_and_their_lease(measured, clients):
    """A task's state changes are one script each; the lease of a process's running tasks is one
    SET per renewal (1 s by default) for all of them, and nothing once none runs."""
    import asyncio
    import json

    sse_port, js_port, counter = measured
    owner, other = clients.tcp(js_port), clients.tcp(sse_port)
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}

    async def post(client, method, params, rid):
        client.revision = MODERN
        message = jsonrpc(method, {**params, "_meta": meta}, rid)
        headers = {"mcp-protocol-version": MODERN, "mcp-method": method,
                   "mcp-name": params.get("name") or params.get("taskId")}
        reply = await client.driver.open("POST", "/mcp", {**client.headers(), **headers}, json.dumps(message).encode())
        [answer] = await client.messages(reply)
        return answer["result"]

    async def ended(client, task_id):
        for rid in range(1000, 1100):
            task = await post(client, "tasks/get", {"taskId": task_id}, rid)
            if task["status"] == "completed":
                return task
            await asyncio.sleep(0.1)
        raise AssertionError(task)

    warm = await post(other, "tools/call", {"name": "job", "arguments": {"seconds": 0}}, 0)  # Redis learns the script
    await ended(other, warm["taskId"])
    before = counter.reading()
    first = await post(owner, "tools/call", {"name": "job", "arguments": {"seconds": 4}}, 1)
    calls = record("the first task of a process with none running (create)", counter.delta(before))
    # the record (a script: GET, then SET as it had not ended), and before it the lease it names
    assert calls == {"evalsha": 1, "get": 1, "set": 2}
    before = counter.reading()
    for rid in range(2, 21):
        await post(owner, "tools/call", {"name": "job", "arguments": {"seconds": 4}}, rid)
    calls = record("19 more tasks while one runs (create)", counter.delta(before))
    assert calls.get("evalsha") == 19 and calls.get("get") == 19
    assert 19 <= calls.get("set", 0) <= 21  # (a renewal or two may fall in)

    before = counter.reading()
    assert (await post(other, "tasks/get", {"taskId": first["taskId"]}, 30))["status"] == "working"
    calls = record("tasks/get of a running task on another process", counter.delta(before))
    assert calls == {"multi": 1, "get": 1, "pttl": 1, "exec": 1, "exists": 1}

    before = counter.reading()
    started = asyncio.get_running_loop().time()
    await asyncio.sleep(2.5)  # the measurement window: 20 tasks run
    window = asyncio.get_running_loop().time() - started
    calls = record(f"the lease of 20 running tasks, {window:.1f} s", counter.delta(before))
    assert set(calls) == {"set"} and 1 <= calls["set"] <= window + 1  # one per second, not one per task

    await ended(other, first["taskId"])
    await asyncio.sleep(1.5)  # every task ended: the lease is left to expire
    before = counter.reading()
    await asyncio.sleep(2.0)
    calls = record("a process with no running task, 2 s", counter.delta(before))
    assert calls == {}
