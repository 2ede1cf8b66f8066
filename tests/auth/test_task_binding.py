"""TX-07: a task belongs to whoever created it. Another principal holding the task id (a leaked
log line, a shared screen) gets exactly the answer an unknown id gets, for tasks/get, tasks/update
and tasks/cancel; and where a transport has a lasting session (stdio), another session of the
same principal does too."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from mcpkit.auth import StaticTokens
from mcpkit.auth.resource import ResourceServer
from mcpkit.protocol.errors import McpError
from mcpkit.server.tasks import TaskManager
from tests.reliability.test_hostile_transport import call

V = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"
ALICE = "tok-alice-0123456789abcdef"
MALLORY = "tok-mallory-0123456789abcdef"


def modern(method: str, params: dict[str, Any], rid: int) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}


async def post(app: Any, token: str, method: str, params: dict[str, Any], name: str | None = None) -> Any:
    headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
               ("authorization", f"Bearer {token}"), ("mcp-protocol-version", V), ("mcp-method", method)]
    if name is not None:
        headers.append(("mcp-name", name))
    answer = await call(app, body=modern(method, params, 1), headers=headers)
    [message] = answer.messages()
    return message


@pytest.fixture
def app():
    from mcpkit.reference import server

    tokens = StaticTokens.from_lines(f"{ALICE} alice; {MALLORY} mallory")
    made = server.http_app(auth=ResourceServer(tokens, resource="http://127.0.0.1:8000/mcp"), json_response=True)
    yield made
    made.close_all()


@pytest.mark.asyncio
@pytest.mark.req("TX-07")
async def test_another_principal_cannot_see_or_cancel_a_task(app):
    created = await post(app, ALICE, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 2}},
                         "slow_compute")
    task_id = created["result"]["taskId"]
    unknown = await post(app, MALLORY, "tasks/get", {"taskId": "no-such-task"}, "no-such-task")
    for method, extra in (("tasks/get", {}), ("tasks/cancel", {}),
                          ("tasks/update", {"inputResponses": {}})):
        refused = await post(app, MALLORY, method, {"taskId": task_id, **extra}, task_id)
        # the same answer as for an id that never existed (only the id differs)
        assert refused["error"]["code"] == unknown["error"]["code"] == -32602, refused
        assert refused["error"]["message"] == unknown["error"]["message"].replace("no-such-task", task_id)
    mine = await post(app, ALICE, "tasks/get", {"taskId": task_id}, task_id)
    assert mine["result"]["status"] == "working"  # mallory's cancel did nothing
    await post(app, ALICE, "tasks/cancel", {"taskId": task_id}, task_id)
    await asyncio.sleep(0)


def test_a_task_bound_to_a_session_is_unknown_to_another_session_of_the_same_principal():
    manager = TaskManager()
    creator = SimpleNamespace(principal=None, task_binding="stdio-1")
    record = manager.create(creator)

    def find(session: Any) -> Any:
        req = SimpleNamespace(method="tasks/get", params={"taskId": record.task_id},
                              capabilities={"extensions": {EXT: {}}})
        return manager.find(session, req)

    assert find(creator) is record
    for other in (SimpleNamespace(principal=None, task_binding="stdio-2"),
                  SimpleNamespace(principal="alice", task_binding="stdio-1"),
                  SimpleNamespace(principal=None, task_binding=None)):
        with pytest.raises(McpError) as info:
            find(other)
        assert info.value.code == -32602 and info.value.message == f"Unknown task: {record.task_id}"
    # a task made where requests stand alone (2026-07-28 over HTTP) belongs to its principal
    sessionless = manager.create(SimpleNamespace(principal="alice", task_binding=None))
    req = SimpleNamespace(method="tasks/get", params={"taskId": sessionless.task_id},
                          capabilities={"extensions": {EXT: {}}})
    assert manager.find(SimpleNamespace(principal="alice", task_binding=None), req) is sessionless
    with pytest.raises(McpError):
        manager.find(SimpleNamespace(principal="mallory", task_binding=None), req)
