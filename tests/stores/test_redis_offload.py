"""What does not need the shared store never waits on it: a session held by this process is
served with no store call, its periodic renewal runs in the background (one at a time)
(transports/http_sessions.py), and a tool's rate limit waits for Redis off the event loop and
off the workers (policy/chain.py, server/pipeline.py waits_on_store). With real processes and a slowed or paused Redis:
tests/scaleout/test_slow_store.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.stores.redis import from_url
from tests.reliability.test_hostile_transport import call, mcp_headers, open_session, ping, rpc

BOUND = 10.0  # a hang guard, never a performance bound
#: what job_gated waits for: a test releases it when the task should finish
GATE = threading.Event()


class Gated:
    """A store method that waits until ``gate`` is open, as on a paused Redis; ``arrived`` is
    set once a call reached it, ``left`` once one returned, ``calls`` lists their first arguments."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.gate = threading.Event()
        self.arrived = threading.Event()
        self.left = threading.Event()
        self.calls: list[Any] = []

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args[0])
        self.arrived.set()
        try:
            assert self.gate.wait(BOUND), "the test never opened the gate"
            return self.real(*args)
        finally:
            self.left.set()


async def served_meanwhile(app: Any, session: str, request: Any, gated: Gated) -> Any:
    """``request`` (a coroutine) reaches the gated store method; the loop serves ``session``
    while it waits there; then the gate opens and its answer comes."""
    pending = asyncio.ensure_future(request)
    try:
        assert await asyncio.to_thread(gated.arrived.wait, BOUND)
        for _ in range(3):
            assert await asyncio.wait_for(ping(app, session), BOUND) == 200
        assert not pending.done()
    finally:
        gated.gate.set()
    return await asyncio.wait_for(pending, BOUND)


def process(url: str, name: str) -> Any:
    joint = "&" if "?" in url else "?"
    server = Server("offload", "1.0", stores=from_url(f"{url}{joint}prefix=offload:", origin=name))

    @server.tool(rate_limit="100/min")
    async def limited() -> str:
        return "ok"

    @server.tool
    async def announce() -> str:
        server.notify_resource_updated("note://x")  # on the event loop
        return "announced"

    return server.http_app(json_response=True)


@pytest.mark.asyncio
async def test_a_held_session_makes_no_store_call_until_its_renewal_is_due(redis_url):
    app = process(redis_url, "a")
    stores = app.server.stores
    calls: list[Any] = []
    real = stores.call

    async def counted(fn: Any, *args: Any) -> Any:
        calls.append(fn)
        return await real(fn, *args)

    try:
        session = await open_session(app)
        stores.call = counted
        for _ in range(20):
            assert await ping(app, session) == 200
        assert calls == []  # no executor hop, no store call: the copy is held and touched recently
    finally:
        app.close_all()
        await stores.aclose()


@pytest.mark.asyncio
async def test_a_due_renewal_runs_in_the_background_one_at_a_time(redis_url):
    app = process(redis_url, "a")
    store = app.session_store
    touch = Gated(store.touch)
    try:
        session = await open_session(app)
        store.touch = touch
        app._touch_every = 0.0  # every request finds its renewal due
        assert await asyncio.wait_for(ping(app, session), BOUND) == 200  # the renewal due starts
        assert await asyncio.to_thread(touch.arrived.wait, BOUND)
        for _ in range(5):  # answered while the renewal waits on the store
            assert await asyncio.wait_for(ping(app, session), BOUND) == 200
        assert touch.calls == [session] and list(app._touching) == [session]
        store.delete(session)  # ended elsewhere, news unheard: the renewal finds it gone
        touch.gate.set()
        pending = app._touching.get(session)
        assert pending is not None
        await asyncio.wait_for(pending, BOUND)
        assert session not in app.sessions  # the copy is dropped, as a False touch always did
        assert await ping(app, session) == 404
    finally:
        touch.gate.set()
        app.close_all()
        await app.server.stores.aclose()


def _limited_call(session: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    return rpc("tools/call", {"name": "limited", "arguments": {}}, 3), mcp_headers(session)


def _tasks_get(session: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    from tests.scaleout.test_two_processes import MODERN, modern

    return modern("tasks/get", {"taskId": "nope"}, 4), [
        ("content-type", "application/json"), ("accept", "application/json"),
        ("mcp-protocol-version", MODERN), ("mcp-method", "tasks/get"), ("mcp-name", "nope")]


@pytest.mark.asyncio
@pytest.mark.parametrize(("store", "method", "request_of", "answered"), [
    ("rates", "take", _limited_call, b'"text":"ok"'),  # an async tool's rate limit (policy/chain.py)
    ("tasks", "get", _tasks_get, b"Unknown task"),  # -32602 (400 under 2026-07-28)
], ids=["async-tool-rate-limit", "tasks-get"])
async def test_a_request_that_needs_redis_waits_for_it_off_the_event_loop(redis_url, store, method, request_of,
                                                                          answered):
    app = process(redis_url, "a")
    target = app.server.stores.rates if store == "rates" else app.server.tasks.store
    gated = Gated(getattr(target, method))
    try:
        session = await open_session(app)
        setattr(target, method, gated)
        body, headers = request_of(session)
        answer = await served_meanwhile(app, session, call(app, body=body, headers=headers), gated)
        assert answered in answer.body, answer.body
    finally:
        gated.gate.set()
        app.close_all()
        await app.server.stores.aclose()


@pytest.mark.asyncio
async def test_a_sync_tool_waiting_for_its_rate_limit_holds_no_worker_of_its_session(redis_url):
    """A sync tool's bucket in Redis is taken on the stores' threads, before the tool has a
    worker: a call waiting for Redis there holds none of its session's share of the workers,
    so the session's other sync calls run meanwhile. One worker per client here, so a call that
    held its worker while it waited would hold up every sync call of the session."""
    joint = "&" if "?" in redis_url else "?"
    server = Server("offload", "1.0", stores=from_url(f"{redis_url}{joint}prefix=offload:", origin="a"),
                    max_workers_per_client=1)

    @server.tool(rate_limit="100/min")
    def limited() -> str:
        return "ok"

    @server.tool
    def add(a: int, b: int) -> int:
        return a + b

    app = server.http_app(json_response=True)
    rates = server.stores.rates
    take = Gated(rates.take)
    try:
        session = await open_session(app)
        rates.take = take
        body, headers = _limited_call(session)
        waiting = asyncio.ensure_future(call(app, body=body, headers=headers))
        assert await asyncio.to_thread(take.arrived.wait, BOUND)
        added = await asyncio.wait_for(
            call(app, body=rpc("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, 8),
                 headers=mcp_headers(session)), BOUND)
        assert b'"structuredContent":{"result":5}' in added.body, added.body
        assert not waiting.done()  # ... answered while the limited call still waits for Redis
        take.gate.set()
        answer = await asyncio.wait_for(waiting, BOUND)
        assert b'"text":"ok"' in answer.body, answer.body
    finally:
        take.gate.set()
        app.close_all()
        await server.stores.aclose()


@pytest.mark.asyncio
async def test_an_update_announced_on_the_event_loop_reads_the_shared_sessions_off_it(redis_url):
    a, b = process(redis_url, "a"), process(redis_url, "b")
    load = Gated(b.session_store.load)
    try:
        session = await open_session(a)
        assert await ping(b, session) == 200  # B restores a copy, refreshed before each update
        b.session_store.load = load
        told = call(b, body=rpc("tools/call", {"name": "announce", "arguments": {}}, 5), headers=mcp_headers(session))
        answer = await asyncio.wait_for(told, BOUND)
        assert b"announced" in answer.body, answer.body
        assert await asyncio.to_thread(load.arrived.wait, BOUND)  # the refresh runs, on a store thread
        assert await asyncio.wait_for(ping(b, session), BOUND) == 200
        assert not load.left.is_set()  # ... and everything above was answered while it waited
    finally:
        load.gate.set()
        for app in (a, b):
            app.close_all()
            await app.server.stores.aclose()


class OffLoop:
    """A task store's method that records, per call, whether it ran on the event loop's thread
    and the status it was given or gave; with ``gate``, it waits there until the gate opens."""

    def __init__(self, real: Any, loop_thread: int, gated: bool = False) -> None:
        self.real = real
        self.loop_thread = loop_thread
        self.gate = threading.Event()
        if not gated:
            self.gate.set()
        self.arrived = threading.Event()
        self.calls: list[tuple[bool, Any]] = []

    def __call__(self, arg: Any) -> Any:
        self.calls.append((threading.get_ident() == self.loop_thread, getattr(arg, "status", arg)))
        self.arrived.set()
        assert self.gate.wait(BOUND), "the test never opened the gate"
        return self.real(arg)


def tasking(url: str) -> Any:
    """A process with a task tool per route that creates tasks: tests/scaleout/app.py's, and
    the combinations it lacks."""
    from mcpkit import Context
    from mcpkit.protocol.errors import McpError
    from tests.scaleout import app as scaleout

    joint = "&" if "?" in url else "?"
    server = Server("offload", "1.0", stores=from_url(f"{url}{joint}prefix=offload:", origin="a"))
    server.tool(task="optional")(scaleout.job)
    server.tool(task="required", name="job_required")(scaleout.job)
    server.tool(task="required")(scaleout.job_sync)
    server.tool(task="required", task_after_input=True)(scaleout.job_after_input)
    server.tool(task="required", rate_limit="1000/min")(scaleout.job_limited)
    server.tool(task="required", rate_limit="1000/min", task_after_input=True,
                name="job_limited_after_input")(scaleout.job_after_input)
    server.tool(task="required", isolation="process", name="job_isolated")(scaleout.job)

    @server.tool(task="required")
    async def job_asking(ctx: Context) -> str:
        answer = await ctx.elicit("Go on?", {"type": "object", "properties": {"go": {"type": "boolean"}}}, key="go")
        return f"go: {answer['content']['go']}"

    @server.tool(task="required")
    async def job_gated() -> str:
        assert await asyncio.to_thread(GATE.wait, BOUND)
        return "released"

    @server.tool(task="required")
    async def job_failing(seconds: float) -> str:
        await asyncio.sleep(seconds)
        raise McpError(-32603, "it failed")

    return server.http_app(json_response=True)


def _modern(method: str, params: dict[str, Any], rid: int) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    from tests.scaleout.test_two_processes import MODERN, modern

    name = params.get("name") or params.get("taskId")
    message = modern(method, params, rid)
    message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = {}
    return message, [
        ("content-type", "application/json"), ("accept", "application/json"),
        ("mcp-protocol-version", MODERN), ("mcp-method", method), ("mcp-name", name)]


async def _rpc(app: Any, method: str, params: dict[str, Any], rid: int) -> dict[str, Any]:
    import json

    body, headers = _modern(method, params, rid)
    answer = await asyncio.wait_for(call(app, body=body, headers=headers), BOUND)
    assert answer.status == 200, (answer.status, answer.body)
    return json.loads(answer.body)


async def _ended(app: Any, task_id: str) -> dict[str, Any]:
    """tasks/get until the task ended (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BOUND
    while True:
        task = (await _rpc(app, "tasks/get", {"taskId": task_id}, 9))["result"]
        if task["status"] in ("completed", "failed", "cancelled") or loop.time() > deadline:
            return task
        await asyncio.sleep(0.01)


ROUTES = [  # (tool, how its task ends)
    ("job", "completed"),  # task="optional", the plain path (start_task)
    ("job_required", "completed"),  # task="required", the plain path
    ("job_sync", "completed"),  # a sync handler: stored from the loop, run on a worker
    ("job_after_input", "completed"),  # ctx.start_task() on the plain path (task_after_input)
    ("job_limited", "completed"),  # the pipeline runs as the task (announce_task)
    ("job_limited_after_input", "completed"),  # ctx.start_task() under the pipeline (Announcement)
    ("job_isolated", "completed"),  # the pipeline hands the handler to a worker process (its runner)
    ("job_failing", "failed"),  # a JSON-RPC error fails the task (TX-05)
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("tool", "outcome"), ROUTES, ids=[tool for tool, _ in ROUTES])
async def test_a_task_is_created_and_settled_off_the_event_loop(redis_url, tool, outcome):
    """2026-07-28 with the tasks extension: the task is stored (TX-03) on a store thread while
    the loop answers a held session, and its settle is written off the loop too."""
    app = tasking(redis_url)
    store = app.server.tasks.store
    put = OffLoop(store.put, threading.get_ident(), gated=True)
    try:
        session = await open_session(app)  # a 2025-11-25 session the loop serves meanwhile
        store.put = put
        body, headers = _modern("tools/call", {"name": tool, "arguments": {"seconds": 0}}, 1)
        served = asyncio.ensure_future(call(app, body=body, headers=headers))
        assert await asyncio.to_thread(put.arrived.wait, BOUND)  # the creation waits on the store ...
        for _ in range(3):
            assert await asyncio.wait_for(ping(app, session), BOUND) == 200  # ... the loop serves on
        assert not served.done()
        put.gate.set()
        import json

        created = json.loads((await asyncio.wait_for(served, BOUND)).body)["result"]
        assert created["resultType"] == "task", created
        task = await _ended(app, created["taskId"])
        assert task["status"] == outcome, task
        # tasks/get reads the live record; the settle's write follows on a store thread
        deadline = asyncio.get_running_loop().time() + BOUND
        while put.calls[-1] != (False, outcome) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert put.calls[0] == (False, "working") and put.calls[-1] == (False, outcome), put.calls
        assert not [c for c in put.calls if c[0]], put.calls  # never on the loop's thread
    finally:
        put.gate.set()
        app.close_all()
        await app.server.stores.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("tool", ["job", "job_limited"])
async def test_a_running_task_cancelled_is_written_off_the_event_loop(redis_url, tool):
    """tasks/cancel stops the run, whose end on the loop (CancelledError) writes nothing over
    the cancel; no write on the loop's thread, and the task says cancelled."""
    app = tasking(redis_url)
    store = app.server.tasks.store
    put = OffLoop(store.put, threading.get_ident())
    try:
        store.put = put
        created = (await _rpc(app, "tools/call", {"name": tool, "arguments": {"seconds": 60}}, 1))["result"]
        await _rpc(app, "tasks/cancel", {"taskId": created["taskId"]}, 2)
        assert (await _ended(app, created["taskId"]))["status"] == "cancelled"
        run = app.server.tasks.store.get(created["taskId"]).future  # the live record's run
        await asyncio.wait({run}, timeout=BOUND)  # it ended on the loop (CancelledError) ...
        assert run.done()
        writes = list(app.server.tasks._writes)  # ... and what that wrote is written
        await asyncio.to_thread(concurrent.futures.wait, writes, BOUND)
        assert (await _ended(app, created["taskId"]))["status"] == "cancelled"
        assert put.calls[-1] == (False, "cancelled") and not [c for c in put.calls if c[0]], put.calls
    finally:
        app.close_all()
        await app.server.stores.aclose()


@pytest.mark.asyncio
async def test_a_task_tool_called_without_the_extension_never_reaches_the_task_store(redis_url):
    """2025-11-25 has no tasks: a task="optional" tool is an ordinary call there, with no task
    store call (TX-01)."""
    app = tasking(redis_url)
    store = app.server.tasks.store
    put, get = OffLoop(store.put, threading.get_ident()), OffLoop(store.get, threading.get_ident())
    try:
        session = await open_session(app)
        store.put, store.get = put, get
        answer = await asyncio.wait_for(call(app, body=rpc("tools/call", {"name": "job", "arguments": {"seconds": 0}}, 3),
                                             headers=mcp_headers(session)), BOUND)
        assert b"done after 0" in answer.body, answer.body
        assert put.calls == [] and get.calls == []
    finally:
        app.close_all()
        await app.server.stores.aclose()


@pytest.mark.asyncio
async def test_a_task_asking_for_input_on_the_event_loop_is_written_off_it(redis_url):
    """ctx.elicit in an async task turns it input_required (TX-04): written off the loop, as
    the answer of tasks/update and the task's end are."""
    app = tasking(redis_url)
    store = app.server.tasks.store
    put = OffLoop(store.put, threading.get_ident())
    try:
        store.put = put
        created = (await _rpc(app, "tools/call", {"name": "job_asking", "arguments": {}}, 1))["result"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + BOUND
        while (task := (await _rpc(app, "tasks/get", {"taskId": created["taskId"]}, 2))["result"])["status"] == "working":
            assert loop.time() < deadline, task
            await asyncio.sleep(0.01)
        assert task["status"] == "input_required" and list(task["inputRequests"]) == ["go"], task
        accept = {"action": "accept", "content": {"go": True}}
        await _rpc(app, "tasks/update", {"taskId": created["taskId"], "inputResponses": {"go": accept}}, 3)
        task = await _ended(app, created["taskId"])
        assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "go: True", task
        assert (False, "input_required") in put.calls and put.calls[-1] == (False, "completed"), put.calls
        assert not [c for c in put.calls if c[0]], put.calls
    finally:
        app.close_all()
        await app.server.stores.aclose()


@pytest.mark.asyncio
async def test_a_settle_the_store_could_not_take_is_written_again_until_it_does(redis_url):
    """A failover or an outage refuses a task's settle: it is written again, so the task does not
    read "working" for as long as this process lives."""
    from mcpkit.stores.errors import StoreUnavailable

    app = tasking(redis_url)
    store = app.server.tasks.store
    real, refused = store.put, []

    outage: list[float] = []  # when the store started refusing: for 0.3 s, every settle

    written: list[str] = []  # settles the store took

    def put(record: Any) -> Any:
        if getattr(record, "status", None) == "completed":
            outage[:] = outage or [time.monotonic()]
            if time.monotonic() - outage[0] < 0.3:
                refused.append(record.task_id)
                raise StoreUnavailable("saving a task: Redis is unreachable (a test)")
            taken = real(record)
            written.append(record.task_id)
            return taken
        return real(record)

    try:
        store.put = put
        import json

        # the job ends once its creation is in the store: a job done while its creation is being
        # written (on a store thread, after the answer) is settled by that write, which then
        # carries "completed" itself and nothing is refused; no job length outlasts that write
        # on a loaded machine for sure
        GATE.clear()
        body, headers = _modern("tools/call", {"name": "job_gated", "arguments": {}}, 1)
        created = json.loads((await asyncio.wait_for(call(app, body=body, headers=headers), BOUND)).body)["result"]
        task_id = created["taskId"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + BOUND
        while await asyncio.to_thread(store.get, task_id) is None:
            assert loop.time() < deadline, "the task's creation was never written"
            await asyncio.sleep(0.02)
        GATE.set()
        # the store's own get may answer from the live record, settled before it is written:
        # wait for the write itself
        while not written:
            assert loop.time() < deadline, "the settle was never written"
            await asyncio.sleep(0.05)
        assert refused and set(refused) == {task_id} and written == [task_id]  # refused, then written
        assert (await asyncio.to_thread(store.get, task_id)).status == "completed"
    finally:
        app.close_all()
