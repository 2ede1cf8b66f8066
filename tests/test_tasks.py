"""The ``io.modelcontextprotocol/tasks`` extension (2026-07-28) over stdio, against the reference
server's tasks fixtures (``greet``, ``slow_compute``, ``failing_job``, ``protocol_error_job``,
``confirm_delete``, ``multi_input``, ``test_tool_with_task``).

Every line the server writes is validated at teardown by the wire fixture: the core 2026-07-28
schema plus the extension's CreateTaskResult, DetailedTask and empty ack (tests/wire.py).
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.conftest import mcpkit_command
from tests.test_stdio import ServerProcess

V = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"
WITH = {"elicitation": {}, "sampling": {}, "extensions": {EXT: {}}}
WITHOUT = {"elicitation": {}, "sampling": {}}
REQUIRED = {"requiredCapabilities": {"extensions": {EXT: {}}}}
CREATE_KEYS = {"resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs", "_meta"}
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


class Client:
    def __init__(self, proc: ServerProcess) -> None:
        self.proc = proc

    def call(self, method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = None) -> Any:
        params = dict(params or {})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": WITH if caps is None else caps,
        }
        return self.proc.call(method, params)

    def result(self, method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = None) -> Any:
        answer = self.call(method, params, caps)
        assert "result" in answer, answer
        return answer["result"]

    def error(self, method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = None) -> Any:
        answer = self.call(method, params, caps)
        assert "error" in answer, answer
        return answer["error"]

    def tool(self, name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> Any:
        return self.result("tools/call", {"name": name, "arguments": arguments or {}, **extra})

    def get(self, task_id: str) -> Any:
        return self.result("tasks/get", {"taskId": task_id})

    def wait_for(self, task_id: str, *statuses: str, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            task = self.get(task_id)
            if task["status"] in statuses:
                return task
            assert time.monotonic() < deadline, f"task still {task['status']!r}: {task}"
            time.sleep(0.05)


@pytest.fixture
def client(wire: Any):
    proc = ServerProcess(wire.command(mcpkit_command("serve")))
    yield Client(proc)
    proc.close_stdin()
    try:
        proc.wait(10)
    except Exception:  # noqa: BLE001
        proc.kill()


def _ack(result: dict[str, Any]) -> None:
    assert result["resultType"] == "complete"
    assert set(result) == {"resultType", "_meta"}, result  # no taskId, status, result, error, inputRequests


@pytest.mark.req("TX-01")
def test_discover_advertises_the_extension_and_no_v1_tasks_capability(client: Client) -> None:
    caps = client.result("server/discover")["capabilities"]
    # the reference server serves skills too (SEP-2640): that extension is its own key
    assert caps["extensions"] == {EXT: {}, "io.modelcontextprotocol/skills": {"directoryRead": True}}
    assert "tasks" not in caps


@pytest.mark.req("TX-02", "TX-03", "TX-04", "TX-07")
def test_a_task_is_created_at_once_readable_at_once_and_completes_with_its_result(client: Client) -> None:
    created = client.tool("slow_compute", {"seconds": 1, "label": "a"})
    assert set(created) == CREATE_KEYS
    assert created["resultType"] == "task" and created["status"] == "working"
    assert ISO.match(created["createdAt"]) and ISO.match(created["lastUpdatedAt"])
    assert created["ttlMs"] == 300_000 and created["pollIntervalMs"] == 500
    task_id = created["taskId"]
    assert len(task_id) >= 32  # 24 random bytes (TX-07)
    first = client.get(task_id)  # durable before the answer (TX-03)
    assert first["resultType"] == "complete" and first["taskId"] == task_id and first["status"] == "working"
    assert not {"result", "error", "inputRequests", "requestState"} & set(first)
    done = client.wait_for(task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "Computed for 1 s (a)."}]
    assert "requestState" not in done and "error" not in done
    other = client.tool("slow_compute", {"seconds": 0})
    assert other["taskId"] != task_id


@pytest.mark.req("TX-01")
def test_without_the_extension_nothing_is_a_task(client: Client) -> None:
    for method, params in (
        ("tasks/get", {"taskId": "nope"}),
        ("tasks/update", {"taskId": "nope", "inputResponses": {}}),
        ("tasks/cancel", {"taskId": "nope"}),
    ):
        error = client.error(method, params, caps=WITHOUT)  # the gate comes before the lookup
        assert error["code"] == -32021 and error["data"] == REQUIRED, (method, error)
    plain = client.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}, caps=WITHOUT)
    assert plain["resultType"] == "complete" and "taskId" not in plain and "task" not in plain
    assert plain["content"] == [{"type": "text", "text": "Computed for 0 s."}]
    error = client.error("tools/call", {"name": "failing_job", "arguments": {}}, caps=WITHOUT)
    assert error["code"] == -32021 and error["data"] == REQUIRED


@pytest.mark.req("TX-01")
def test_a_sync_only_tool_ignores_the_legacy_task_param(client: Client) -> None:
    result = client.tool("greet", {"name": "sep-2243"}, task={"ttl": 60000, "pollInterval": 100})
    assert result["resultType"] == "complete" and "taskId" not in result
    assert result["content"] == [{"type": "text", "text": "Hello, sep-2243!"}]


@pytest.mark.req("TX-05")
def test_a_tool_error_completes_and_a_protocol_error_fails(client: Client) -> None:
    tool_error = client.wait_for(client.tool("failing_job")["taskId"], "completed", "failed", "cancelled")
    assert tool_error["status"] == "completed"
    assert tool_error["result"]["isError"] is True
    assert tool_error["result"]["content"] == [{"type": "text", "text": "The job failed after 1 s."}]
    failed = client.wait_for(client.tool("protocol_error_job")["taskId"], "completed", "failed", "cancelled")
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"] == {"code": -32603, "message": "The job hit a protocol-level error."}


@pytest.mark.req("TX-04")
def test_cancel_is_an_empty_ack_stops_the_work_and_is_idempotent(client: Client) -> None:
    task_id = client.tool("slow_compute", {"seconds": 60})["taskId"]
    _ack(client.result("tasks/cancel", {"taskId": task_id}))
    assert client.wait_for(task_id, "cancelled", "completed", "failed", timeout=5)["status"] == "cancelled"
    _ack(client.result("tasks/cancel", {"taskId": task_id}))
    time.sleep(0.2)
    assert client.get(task_id)["status"] == "cancelled"
    finished = client.tool("slow_compute", {"seconds": 0})["taskId"]
    client.wait_for(finished, "completed")
    _ack(client.result("tasks/cancel", {"taskId": finished}))  # an ended task: still an ack, not -32602
    assert client.get(finished)["status"] == "completed"  # its result is not thrown away


@pytest.mark.req("TX-04")
def test_input_required_until_tasks_update_answers(client: Client) -> None:
    task_id = client.tool("confirm_delete", {"filename": "a.txt"})["taskId"]
    waiting = client.wait_for(task_id, "input_required")
    assert waiting["inputRequests"] == {
        "confirm": {
            "method": "elicitation/create",
            "params": {
                "message": "Delete a.txt?",
                "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]},
                "mode": "form",
            },
        }
    }
    assert "requestState" not in waiting
    accept = {"action": "accept", "content": {"confirm": True}}
    _ack(client.result("tasks/update", {"taskId": task_id, "inputResponses": {"unknown-key": accept}}))
    assert client.get(task_id)["status"] == "input_required"  # unknown keys are ignored
    _ack(client.result("tasks/update", {"taskId": task_id, "inputResponses": {"confirm": accept}}))
    done = client.wait_for(task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "Deleted a.txt."}]


@pytest.mark.req("TX-04")
def test_a_partial_answer_keeps_the_task_input_required(client: Client) -> None:
    task_id = client.tool("multi_input")["taskId"]
    deadline = time.monotonic() + 10
    while set(client.get(task_id).get("inputRequests", {})) != {"first", "second"}:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    answer = {"action": "accept", "content": {"name": "partial-1", "confirm": True}}
    _ack(client.result("tasks/update", {"taskId": task_id, "inputResponses": {"first": answer}}))
    partial = client.get(task_id)
    assert partial["status"] == "input_required" and set(partial["inputRequests"]) == {"second"}
    answer = {"action": "accept", "content": {"name": "partial-2", "confirm": True}}
    _ack(client.result("tasks/update", {"taskId": task_id, "inputResponses": {"second": answer}}))
    done = client.wait_for(task_id, "completed", "failed", "cancelled")
    assert done["result"]["content"] == [{"type": "text", "text": "Received partial-1 and partial-2."}]


@pytest.mark.req("TX-04", "TX-07")
def test_unknown_tasks_are_invalid_params_and_v1_methods_are_gone(client: Client) -> None:
    error = client.error("tasks/get", {"taskId": "no-such-task"})
    assert error["code"] == -32602 and error["data"] == {"taskId": "no-such-task"}
    for method in ("tasks/result", "tasks/list"):
        assert client.error(method, {"taskId": "no-such-task"})["code"] == -32601


@pytest.mark.req("TX-03")
def test_multi_round_trip_inputs_resolve_first_and_only_the_last_round_creates_the_task(client: Client) -> None:
    first = client.tool("test_tool_with_task")
    assert first["resultType"] == "input_required" and "taskId" not in first
    assert list(first["inputRequests"]) == ["user_name"]
    answer = {"action": "accept", "content": {"name": "Alice"}}
    created = client.tool(
        "test_tool_with_task", inputResponses={"user_name": answer}, requestState=first["requestState"]
    )
    assert created["resultType"] == "task" and set(created) == CREATE_KEYS
    done = client.wait_for(created["taskId"], "completed", "failed", "cancelled")
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "Hello, Alice! (from a task)"}]


# ---------------------------------------------------------------------- in process: a sync tool as a task


@pytest.mark.asyncio
@pytest.mark.req("TX-01", "TX-04")
async def test_a_sync_tool_runs_as_a_task_in_a_worker_thread_and_blocks_for_its_input(wire: Any) -> None:
    import asyncio
    import json
    import threading

    from mcpkit import Context, Server
    from mcpkit.server.session import ServerSession

    server = Server("t", task_ttl_ms=60_000)
    seen: dict[str, Any] = {}

    @server.tool(task="required")
    def ask(ctx: Context) -> str:
        seen["thread"] = threading.current_thread().name
        answer = ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
        return f"Hi {answer['content']['name']}."

    methods: dict[Any, str] = {}
    answers: dict[Any, dict[str, Any]] = {}

    def send(batch: list[Any]) -> None:
        for out in batch:
            message = json.loads(out.payload)
            wire.record(message, V, methods.get(message.get("id")))
            answers[message["id"]] = message

    session = ServerSession(server, send, asyncio.get_running_loop(), inline_sync=False)

    def call(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        methods[rid] = method
        meta = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": WITH}
        session.feed(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}))
        session.flush()
        return answers[rid]["result"]

    created = call(1, "tools/call", {"name": "ask", "arguments": {}})
    assert created["resultType"] == "task" and created["ttlMs"] == 60_000
    task_id = created["taskId"]
    for rid in range(2, 200):
        task = call(rid, "tasks/get", {"taskId": task_id})
        if task["status"] == "input_required":
            break
        await asyncio.sleep(0.02)
    assert task["inputRequests"]["name"]["method"] == "elicitation/create"
    assert seen["thread"].startswith("mcpkit-worker")
    call(200, "tasks/update", {"taskId": task_id, "inputResponses": {"name": {"action": "accept", "content": {"name": "Bo"}}}})
    for rid in range(201, 400):
        task = call(rid, "tasks/get", {"taskId": task_id})
        if task["status"] == "completed":
            break
        await asyncio.sleep(0.02)
    assert task["result"]["content"] == [{"type": "text", "text": "Hi Bo."}]
    session.close()


def test_tool_task_modes_are_checked_at_registration() -> None:
    from mcpkit import Server

    server = Server("t")
    with pytest.raises(ValueError, match="task must be"):
        server.add_tool("x", lambda args: "", input_schema={"type": "object"}, task="always")
    with pytest.raises(ValueError, match="task_after_input"):
        server.tool(lambda: "", name="y", task="optional", task_after_input=True)
    with pytest.raises(ValueError, match="task_ttl_ms"):
        Server("t", task_ttl_ms=0)


@pytest.mark.req("TX-04")
def test_the_memory_store_keeps_ended_tasks_for_their_ttl_and_stays_bounded() -> None:
    from mcpkit.server.tasks import TaskRecord
    from mcpkit.stores.tasks import MemoryTaskStore

    store = MemoryTaskStore(max_tasks=2)
    running, ended = TaskRecord("a", 1000, 500), TaskRecord("b", 1000, 500)
    ended.status, ended.expires_at = "completed", time.monotonic() + 60
    store.put(running)
    store.put(ended)
    assert store.get("a") is running and store.get("b") is ended
    store.put(TaskRecord("c", 1000, 500))  # over the bound: the ended task goes, the running one stays
    assert store.get("b") is None and store.get("a") is running and len(store) == 2
    running.status, running.expires_at = "completed", time.monotonic() - 1  # its ttl is over
    assert store.get("a") is None


# ---------------------------------------------------------------------- in process: a task under a policy


class InProcess:
    """A 2026-07-28 client that declares the extension, on one session of ``server`` on the
    running loop; every message the server sends is validated by ``wire``."""

    def __init__(self, server: Any, wire: Any, *, inline_sync: bool) -> None:
        import asyncio

        from mcpkit.server.session import ServerSession

        self.wire = wire
        self.answers: dict[Any, dict[str, Any]] = {}
        self.methods: dict[Any, str] = {}
        self.rid = 0
        self.session = ServerSession(server, self._send, asyncio.get_running_loop(), inline_sync=inline_sync)

    def _send(self, batch: list[Any]) -> None:
        import json

        for out in batch:
            message = json.loads(out.payload)
            self.wire.record(message, V, self.methods.get(message.get("id")))
            self.answers[message["id"]] = message

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        import asyncio
        import json

        self.rid += 1
        rid = self.rid
        self.methods[rid] = method
        meta = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": WITH}
        self.session.feed(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                      "params": {**params, "_meta": meta}}))
        self.session.flush()
        for _ in range(500):
            if rid in self.answers:
                return self.answers[rid]["result"]
            await asyncio.sleep(0.01)
        raise AssertionError(f"{method} unanswered")



@pytest.mark.asyncio
@pytest.mark.req("TX-05", "TL-11")
async def test_a_tasks_result_takes_the_pipeline_limits_sanitizing_timeout_and_audit(wire: Any) -> None:
    """A tool called as a task ran its handler outside the pipeline: its result was stored
    without the result size limit, the sanitizing or the timeout, and the audit line said only
    'task', never how the call ended. The task's result is now the pipeline's answer."""
    import asyncio
    import json
    import threading

    from mcpkit import Context, Server
    from mcpkit.policy import Policy
    from mcpkit.policy.limits import Limits

    lines: list[dict[str, Any]] = []

    class Audit:
        def record(self, entry: dict[str, Any]) -> None:
            lines.append(dict(entry))

    server = Server("t", policy=Policy(audit=Audit(), limits=Limits(max_result_bytes=2_000, sanitize=True, timeout=0.3)))

    @server.tool(task="required", read_only=True, open_world=False)
    async def big() -> str:
        return "\x1b[31mred\x1b[0m" + "A" * 10_000

    @server.tool(task="required", read_only=True, open_world=False)
    def big_sync() -> str:
        return "\x1b[31mred\x1b[0m" + "A" * 10_000

    @server.tool(task="required", read_only=True, open_world=False)
    async def slow() -> str:
        await asyncio.sleep(3)
        return "finished after its deadline"

    @server.tool(task="required", read_only=True, open_world=False)
    def slow_sync() -> str:
        time.sleep(1)
        return "finished after its deadline"

    @server.tool(task="required", read_only=True, open_world=False)
    def ask(ctx: Context) -> str:  # a sync task waits for its input on a worker, not the reader
        answer = ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
        return f"Hi {answer['content']['name']} from {threading.current_thread().name}."

    client = InProcess(server, wire, inline_sync=True)
    call = client.call

    async def ended(task_id: str, *statuses: str) -> dict[str, Any]:
        for _ in range(300):
            task = await call("tasks/get", {"taskId": task_id})
            if task["status"] in statuses:
                return task
            await asyncio.sleep(0.02)
        raise AssertionError(task)

    for name in ("big", "big_sync"):
        created = await call("tools/call", {"name": name, "arguments": {}})
        assert created["resultType"] == "task"
        task = await ended(created["taskId"], "completed", "failed")
        assert task["status"] == "completed"
        assert len(json.dumps(task["result"])) <= 2_200, name  # max_result_bytes
        assert "\x1b" not in json.dumps(task["result"], ensure_ascii=False), name  # sanitized
    for name in ("slow", "slow_sync"):
        created = await call("tools/call", {"name": name, "arguments": {}})
        task = await ended(created["taskId"], "completed", "failed")
        assert task["result"]["isError"] is True, name
        assert task["result"]["_meta"]["dev.mcpkit/error"]["code"] == "E_TIMEOUT", name
    created = await call("tools/call", {"name": "ask", "arguments": {}})
    task = await ended(created["taskId"], "input_required")
    await call("tasks/update", {"taskId": created["taskId"],
                                "inputResponses": {"name": {"action": "accept", "content": {"name": "Bo"}}}})
    task = await ended(created["taskId"], "completed")
    assert task["result"]["content"][0]["text"].startswith("Hi Bo from mcpkit-worker")
    await asyncio.sleep(1.0)  # slow_sync's handler ends; its late value changes nothing
    assert [(line["tool"], line["outcome"], line["code"]) for line in lines] == [
        ("big", "ok", None), ("big_sync", "ok", None),
        ("slow", "error", "E_TIMEOUT"), ("slow_sync", "error", "E_TIMEOUT"), ("ask", "ok", None),
    ]
    client.session.close()


# ---------------------------------------------------------------------- shutdown


@pytest.mark.asyncio
async def test_closing_the_tasks_fails_those_still_running_on_every_route_and_stops_their_runs(wire: Any) -> None:
    """A process that shuts down settles its own running tasks, whichever route created them:
    each fails with a retryable error saying so, and its handler is told to stop."""
    import asyncio

    from mcpkit import Context, Server
    from mcpkit.stores.tasks import SHUT_DOWN

    server = Server("t", task_ttl_ms=60_000)
    stopped: list[str] = []

    async def wait_async(name: str) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.append(name)
            raise
        return "finished"

    def wait_sync(name: str, ctx: Context) -> str:
        if ctx.cancelled.wait(60):
            stopped.append(name)
        return "finished"

    @server.tool(task="required")
    async def plain_async() -> str:
        return await wait_async("plain_async")

    @server.tool(task="required")
    def plain_sync(ctx: Context) -> str:
        return wait_sync("plain_sync", ctx)

    @server.tool(task="required", task_after_input=True)
    async def after_input(ctx: Context) -> str:
        await ctx.start_task()
        return await wait_async("after_input")

    @server.tool(task="required", rate_limit="100/min")  # a step applies: the pipeline is the task
    async def piped_async() -> str:
        return await wait_async("piped_async")

    @server.tool(task="required", rate_limit="100/min")
    def piped_sync(ctx: Context) -> str:
        return wait_sync("piped_sync", ctx)

    client = InProcess(server, wire, inline_sync=False)
    call = client.call
    names = ["plain_async", "plain_sync", "after_input", "piped_async", "piped_sync"]
    tasks = {}
    for name in names:
        created = await call("tools/call", {"name": name, "arguments": {}})
        assert created["resultType"] == "task", (name, created)
        tasks[name] = created["taskId"]
    for name in names:
        assert (await call("tasks/get", {"taskId": tasks[name]}))["status"] == "working", name
    server.close_tasks()
    for name in names:
        task = await call("tasks/get", {"taskId": tasks[name]})
        assert task["status"] == "failed" and task["error"] == SHUT_DOWN, (name, task)
        assert task["error"]["data"]["retryable"] is True
    for _ in range(500):
        if sorted(stopped) == sorted(names):
            break
        await asyncio.sleep(0.01)
    assert sorted(stopped) == sorted(names)  # every handler was told the task ended
    for name in names:  # and what they returned after that changed nothing
        assert (await call("tasks/get", {"taskId": tasks[name]}))["status"] == "failed", name
    client.session.close()
