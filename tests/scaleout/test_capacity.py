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
    """Commands and network bytes a Redis served between two readings. A reading is two INFO
    commands of a fixed size, so however many a step took (``settled`` polls) they are taken out."""

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url)
        self.taken = 0
        self.cost_in = 0
        first = self.reading()
        self.cost_in = self.reading()[2] - first[2]  # what one reading sends

    def reading(self) -> tuple[int, dict[str, int], int, int]:
        stats = self.client.info("commandstats")
        net = self.client.info("stats")
        self.taken += 1
        calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
        return self.taken, calls, int(net["total_net_input_bytes"]), int(net["total_net_output_bytes"])

    def delta(self, before: tuple[int, dict[str, int], int, int]) -> tuple[dict[str, int], int, int]:
        after = self.reading()
        readings = after[0] - before[0]
        calls = {k: n - before[1].get(k, 0) for k, n in after[1].items()}
        calls["info"] = calls.get("info", 0) - 2 * readings  # the readings are not the server's
        calls = {k: n for k, n in calls.items() if n}
        return calls, after[2] - before[2] - readings * self.cost_in, after[3] - before[3]

    async def settled(self, before: tuple[int, dict[str, int], int, int],
                      expected: dict[str, int]) -> tuple[dict[str, int], int, int]:
        """The delta once ``expected`` has arrived (an answer's stream is set to expire just after
        it is delivered), or whatever arrived by a deadline; one more command shows as a surplus."""
        import asyncio

        deadline = asyncio.get_running_loop().time() + 5
        while True:
            delta = self.delta(before)
            if all(delta[0].get(k, 0) >= n for k, n in expected.items()):
                return delta
            if asyncio.get_running_loop().time() > deadline:
                return delta
            await asyncio.sleep(0.02)


@pytest.fixture(scope="module")
def measured() -> Iterator[tuple[int, int, int, Counter]]:
    """A redis-server of its own, and three processes on it: one SSE (resumable), one JSON, and
    one JSON whose sessions idle out after 2 s (their renewal and expiry, measured in seconds)."""
    if REDIS_SERVER is None:
        _missing("the capacity model counts commands on a redis-server of its own: install redis-server")
    redis = RedisProcess()
    redis.start()
    env = {"MCPKIT_STORE": f"{redis.url}?prefix=cap:", "MCPKIT_STATE_KEY": secrets.token_hex(32)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    procs = []
    try:
        sse, sse_port = start_server(APP)
        procs.append(sse)
        js, js_port = start_server(APP, "--json")
        procs.append(js)
        short, short_port = start_server(APP, "--json", "--session-idle-timeout", str(IDLE))
        procs.append(short)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        yield sse_port, js_port, short_port, Counter(redis.url)
    finally:
        for proc in procs:
            assert "Traceback" not in stop_server(proc)
        redis.stop()


IDLE = 2.0
ROWS: list[tuple[str, dict[str, int], int, int]] = []
#: what a step sends Redis, in bytes, may differ this much from the figure asserted (ids and
#: timestamps are of fixed length; JSON answers and scripts' arguments vary a little)
TOLERANCE = 0.1
CONNECTING = {"hello", "ping", "client|setinfo", "client|setname", "select"}


def record(what: str, delta: tuple[dict[str, int], int, int],
           calls: dict[str, int] | None = None, sent: int | None = None) -> dict[str, int]:
    """Print it in the table; with ``calls`` and ``sent``, assert it: the commands exactly, the
    bytes within TOLERANCE."""
    ROWS.append((what, *delta))
    # a process's pool may open one more connection under load (HELLO, PING): not per request
    delta = ({k: n for k, n in delta[0].items() if k not in CONNECTING}, *delta[1:])
    if calls is not None:
        assert delta[0] == calls, what
    if sent is not None:
        assert abs(delta[1] - sent) <= TOLERANCE * sent, (what, delta[1], sent)
    return delta[0]


def teardown_module() -> None:
    if ROWS:
        # bytes Redis received (its replies are left out: INFO's own vary in size)
        print("\n| what | Redis commands | bytes sent to Redis |\n|---|---|---|")
        for what, calls, b_in, _ in ROWS:
            text = ", ".join(f"{k} {n}" for k, n in sorted(calls.items())) or "none"
            print(f"| {what} | {text} | {b_in:,} |")


async def life(client, scarce: bool) -> None:
    """Every step of a session once, unmeasured: the process's connections to Redis are made and
    Redis has learned every script before anything is counted."""
    await client.initialize()
    await client.tool("add", {"a": 1, "b": 1})
    await client.messages(await client.post(call("count", {"steps": 1}, id=400, token="w")))
    await client.result("logging/setLevel", {"level": "info"})
    if scarce:
        await client.tool("scarce", {})
    assert (await client.delete()).status == 200


async def dropped(counter: Counter) -> None:
    """Until the event streams of the sessions ended are gone (their process drops them after
    the DELETE is answered), so that no step counts another's."""
    import asyncio

    for _ in range(250):
        if not counter.client.keys("cap:ev:*"):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(counter.client.keys("cap:ev:*"))


QUOTA = {"evalsha": 1, "zremrangebyscore": 1, "zadd": 1, "pexpire": 1, "zcard": 1}  # the claim script
# the record saved when the session opens and again once initialized, each change announced
OPEN = {"set": 2, "publish": 2}
EVENT = {"evalsha": 1, "xrevrange": 1, "xadd": 1, "pexpire": 1}  # one resumable SSE event


def times(n: int, *parts: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0) + n * v
    return out


@pytest.mark.asyncio
async def test_what_a_session_and_its_requests_cost(measured, clients):
    sse_port, js_port, _, counter = measured
    await life(clients.tcp(js_port), scarce=True)  # (scarce allows 3 a minute: warmed up once)
    await life(clients.tcp(sse_port), scarce=False)
    await dropped(counter)
    for port, other, mode in ((js_port, sse_port, "JSON"), (sse_port, js_port, "SSE")):
        sse = mode == "SSE"
        client = clients.tcp(port)
        before = counter.reading()
        await client.initialize()
        # SSE: the answer to initialize is an event (priming + answer), and delivered it expires
        expected = times(1, QUOTA, OPEN, times(2, EVENT) if sse else {}, {"pexpire": 1} if sse else {})
        record(f"open a session ({mode}: initialize + initialized)", await counter.settled(before, expected),
               expected, {"JSON": 1100, "SSE": 1780}[mode])

        before = counter.reading()
        for i in range(10):
            assert (await client.tool("add", {"a": i, "b": 1}))["structuredContent"] == {"result": i + 1}
        # JSON: a call that changes no session state costs Redis nothing. SSE: two resumable
        # events a call (the priming event and the answer), and the stream set to expire once delivered
        expected = times(10, EVENT, EVENT, {"pexpire": 1}) if sse else {}
        record(f"10 plain tools/call ({mode})", await counter.settled(before, expected),
               expected, {"JSON": 0, "SSE": 5950}[mode] or None)

        before = counter.reading()
        reply = await client.post(call("count", {"steps": 5}, id=500, token="p"))
        await client.messages(reply)
        expected = times(1, times(7, EVENT), {"pexpire": 1}) if sse else {}
        record(f"a call with 5 progress notifications ({mode})", await counter.settled(before, expected),
               expected, {"JSON": 0, "SSE": 1970}[mode] or None)

        before = counter.reading()
        await client.result("logging/setLevel", {"level": "debug"})
        # the record saved (SET XX: only while it exists) and the change announced
        expected = times(1, {"set": 1, "publish": 1}, times(2, EVENT) if sse else {}, {"pexpire": 1} if sse else {})
        record(f"a request that changes the session (logging/setLevel, {mode})",
               await counter.settled(before, expected), expected, {"JSON": 460, "SSE": 945}[mode])

        before = counter.reading()
        assert (await client.tool("scarce", {})).get("isError") is not True
        # one token bucket script
        expected = times(1, {"evalsha": 1, "time": 1, "hmget": 1, "hset": 1, "pexpire": 1},
                         times(2, EVENT) if sse else {}, {"pexpire": 1} if sse else {})
        record(f"a rate-limited call ({mode})", await counter.settled(before, expected),
               expected, {"JSON": 150, "SSE": 735}[mode])

        elsewhere = clients.tcp(other)
        elsewhere.session_id, elsewhere.revision = client.session_id, client.revision
        before = counter.reading()
        assert (await elsewhere.tool("add", {"a": 1, "b": 1}))["structuredContent"] == {"result": 2}
        # read from the store, and renewed at once (record and quota entry) as it is served there
        expected = times(1, {"get": 1, "zadd": 1, "pexpire": 1},
                         {} if sse else times(2, EVENT), {} if sse else {"pexpire": 1})
        record(f"the session's first request on another process ({mode} opened it)",
               await counter.settled(before, expected), expected, {"JSON": 835, "SSE": 267}[mode])

        if sse:
            before = counter.reading()
            stream = await client.get()
            assert stream.status == 200
            priming = await stream.next_event()
            assert priming is not None and priming.id
            await stream.disconnect()
            # the other processes are told to drop their copy's GET stream; its priming event
            expected = times(1, {"publish": 1}, EVENT)
            record("a GET stream opened", await counter.settled(before, expected), expected, 280)

            before = counter.reading()
            resumed = await client.get(last_event_id=priming.id)
            assert resumed.status == 200
            await resumed.disconnect()
            # its events read back (MULTI: EXISTS, XRANGE), a new priming event, the others told
            expected = times(1, {"multi": 1, "exists": 1, "xrange": 1, "exec": 1, "publish": 1}, EVENT)
            record("a GET stream resumed", await counter.settled(before, expected), expected, 460)

        before = counter.reading()
        assert (await client.delete()).status == 200
        # the record dropped, the quota entry released, the end announced; and the SSE streams
        # dropped by the process that made them (JSON: the SSE process served it once)
        expected = {"del": 2, "zrem": 1, "publish": 1}
        record(f"end a session ({mode})", await counter.settled(before, expected),
               expected, {"JSON": 1195, "SSE": 1195}[mode])


@pytest.mark.asyncio
async def test_an_idle_session_renewed_then_expired(measured, clients):
    """Served within the idle timeout, the record and the quota entry are renewed at most every
    quarter of it (1 s at least); left idle, nothing is sent: Redis expires both by itself."""
    import asyncio

    _, _, short_port, counter = measured
    await life(clients.tcp(short_port), scarce=False)
    client = clients.tcp(short_port)
    await client.initialize()
    session_key = f"cap:session:{{{client.session_id}}}"
    memory = {"record": counter.client.memory_usage(session_key, samples=0)}
    [client_key] = counter.client.keys("cap:client:*")
    memory["quota entry"] = counter.client.memory_usage(client_key, samples=0)
    print(f"\nMEMORY USAGE of an idle session's keys: {memory}")
    assert memory["record"] < 512 and memory["quota entry"] < 256  # docs/deployment.md: ≈ 0.5 KB

    await asyncio.sleep(1.1)  # past the renewal interval (a quarter of the timeout, 1 s at least)
    before = counter.reading()
    await client.tool("add", {"a": 1, "b": 1})
    expected = {"zadd": 1, "pexpire": 1}  # ZADD XX of the quota entry, PEXPIRE of the record
    record("a request past the renewal interval", await counter.settled(before, expected), expected, 198)

    before = counter.reading()
    await asyncio.sleep(IDLE + 1)  # idle: the copy here is swept, the keys expire in Redis
    record(f"an idle session expiring ({IDLE + 1:.0f} s)", counter.delta(before), {}, None)
    assert not counter.client.exists(session_key)

    before = counter.reading()
    reply = await client.post(call("add", {"a": 1, "b": 1}, id=900))
    assert reply.status == 404
    expected = {"get": 1}  # the store says it is gone
    record("a request to an expired session (404)", await counter.settled(before, expected), expected, 66)


@pytest.mark.asyncio
async def test_a_resource_update_is_one_publish(measured, clients):
    sse_port, _, _, counter = measured
    client = clients.tcp(sse_port)
    await client.initialize()
    await client.result("resources/subscribe", {"uri": "note://shared"})
    before = counter.reading()
    await client.tool("touch", {"uri": "note://shared"})
    calls = record("a resource update notification (bus)", counter.delta(before))
    assert calls.get("publish", 0) == 1


@pytest.mark.asyncio
async def test_the_2026_07_28_stateless_path_needs_no_shared_state(measured, clients):
    _, js_port, _, counter = measured
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

    sse_port, js_port, _, counter = measured
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
