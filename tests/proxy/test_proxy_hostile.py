"""The proxy in front of upstreams that misbehave on purpose (tests/proxy/servers/hostile.py and
mounted Servers): what one client's request makes an upstream say reaches no other client, a
task belongs to the client that created it, and an upstream's chatter does not pile up."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.client import Client
from mcpkit.proxy import upstreams_of

aio = pytest.mark.asyncio
HOSTILE = str(Path(__file__).parent / "servers" / "hostile.py")


async def until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def close_all(server: Server) -> None:
    for upstream in upstreams_of(server):
        upstream.close()


@aio
async def test_what_an_upstream_says_while_completing_for_one_client_never_reaches_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a completion has no context, so it was not counted in flight: the upstream's log line and
    # sampling request about B's completion went to A, the only client with a call in flight
    monkeypatch.setenv("HOSTILE", "tell")
    proxy = Server.proxy([sys.executable, HOSTILE])
    upstream = upstreams_of(proxy)[0]
    logs: list[Any] = []
    asked: list[Any] = []

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}

    try:
        async with Client(proxy, on_log=logs.append, sampling_handler=sample) as a, Client(proxy) as b:
            held = asyncio.create_task(a.call_tool("hold", {"s": 1.5}))
            await until(lambda: len(upstream._calls) == 1)
            done = await b.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"},
                                                           "argument": {"name": "who", "value": "secret-of-b"}})
            assert done["completion"]["values"] == ["secret-of-b!"]
            assert (await held)["content"][0]["text"] == "held"
        assert not [line for line in logs if "secret-of-b" in str(line)], logs
        assert asked == []
    finally:
        close_all(proxy)


@aio
async def test_a_task_an_upstream_created_for_one_principal_is_unknown_to_another() -> None:
    # upstream, every task is the proxy's: the proxy forwarded tasks/get, tasks/update and
    # tasks/cancel of any task id it had seen, for whoever sent it (TX-07 held for its own tasks)
    from mcpkit.auth import StaticTokens
    from mcpkit.auth.resource import ResourceServer
    from tests.auth.test_task_binding import ALICE, MALLORY, post
    from tests.proxy.test_modern_upstream import MODERN, child

    parent = Server("parent")
    parent.mount(child(), protocol_version=MODERN)
    tokens = StaticTokens.from_lines(f"{ALICE} alice; {MALLORY} mallory")
    app = parent.http_app(auth=ResourceServer(tokens, resource="http://127.0.0.1:8000/mcp"), json_response=True)
    try:
        created = await post(app, ALICE, "tools/call", {"name": "slow", "arguments": {}}, "slow")
        task_id = created["result"]["taskId"]
        unknown = await post(app, MALLORY, "tasks/get", {"taskId": "no-such-task"}, "no-such-task")
        for method, extra in (("tasks/get", {}), ("tasks/cancel", {}), ("tasks/update", {"inputResponses": {}})):
            refused = await post(app, MALLORY, method, {"taskId": task_id, **extra}, task_id)
            assert refused["error"]["code"] == unknown["error"]["code"] == -32602, refused
            assert refused["error"]["message"] == unknown["error"]["message"].replace("no-such-task", task_id)
        for _ in range(200):
            mine = await post(app, ALICE, "tasks/get", {"taskId": task_id}, task_id)
            if mine["result"]["status"] != "working":
                break
            await asyncio.sleep(0.02)
        assert mine["result"]["status"] == "completed", mine  # mallory's cancel did nothing
    finally:
        app.close_all()
        close_all(parent)
