"""The proxy in front of upstreams that misbehave on purpose (tests/proxy/servers/hostile.py and
mounted Servers): what one client's request makes an upstream say reaches no other client, a
task belongs to the client that created it, and an upstream's chatter does not pile up."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.client import Client
from mcpkit.proxy import upstreams_of
from mcpkit.proxy.upstream import RELIST_INTERVAL
from tests.proxy.test_upstream import close_all, until

aio = pytest.mark.asyncio
HOSTILE = str(Path(__file__).parent / "servers" / "hostile.py")


@aio
async def test_what_an_upstream_says_while_completing_for_one_client_never_reaches_another() -> None:
    # a completion was once forwarded without its client's context, so not counted in flight: the
    # upstream's log line and sampling request about B's completion went to A, the only client
    # with a call in flight
    proxy = Server.proxy([sys.executable, HOSTILE], env={"HOSTILE": "tell"})
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
@pytest.mark.req("TX-07")
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


@aio
async def test_an_upstreams_stray_answers_and_notifications_do_not_pile_up_in_the_proxy() -> None:
    # the upstream's Client kept every notification, server request and answer to an id never
    # asked, for as long as the proxy ran: a flood of them grew the proxy by hundreds of MB
    proxy = Server.proxy([sys.executable, HOSTILE], env={"HOSTILE": "stray", "FLOOD": "5000"})
    upstream = upstreams_of(proxy)[0]
    logs: list[Any] = []
    try:
        async with Client(proxy, on_log=logs.append) as client:
            assert (await client.call_tool("flood"))["content"][0]["text"] == "flooded"
            await until(lambda: any(line.get("data") == "flood done" for line in logs))
            assert len(logs) == 5001  # the caller's call was in flight: its log lines are its own
            kept = upstream._client
            assert kept is not None
            assert (len(kept.notifications), len(kept.unmatched), len(kept.server_requests)) == (0, 0, 0)
            assert (await client.call_tool("read"))["content"][0]["text"] == "ran read"
    finally:
        close_all(proxy)


@aio
async def test_a_client_keeps_the_newest_messages_it_is_told_to() -> None:
    server = Server("chatty")

    @server.tool
    async def chat(n: int, ctx: Context) -> str:
        for i in range(n):
            await ctx.log("info", f"line {i}")
        return "done"

    async with Client(server, keep_messages=10) as client:
        await client.call_tool("chat", {"n": 100})
        kept = [n["params"]["data"] for n in client.notifications if n["method"] == "notifications/message"]
        assert 10 <= len(kept) <= 20 and kept[-1] == "line 99"
    async with Client(server) as client:  # by default the newest 10,000: all of these
        await client.call_tool("chat", {"n": 100})
        assert sum(n["method"] == "notifications/message" for n in client.notifications) == 100
    async with Client(server, keep_messages=None) as client:  # None: every one, unbounded
        await client.call_tool("chat", {"n": 100})
        assert sum(n["method"] == "notifications/message" for n in client.notifications) == 100
    assert Client(server).keep_messages == 10_000  # a long-lived client is bounded by default


@aio
@pytest.mark.req("TL-13")
async def test_one_upstream_list_change_is_one_list_changed_for_the_clients() -> None:
    # every tool registered or withdrawn was its own list_changed (TL-13): an upstream adding 30
    # tools made each client re-list 30 times, on every change and every reconnection
    source = Server("source")
    source.add_tool("first", lambda a: "x", input_schema={"type": "object"})
    parent = Server("parent")
    upstream = parent.mount(source, prefix="s")
    try:
        async with Client(parent) as client:
            await client.list_tools()
            client.notifications.clear()
            with source.batch_changes():
                for i in range(30):
                    source.add_tool(f"t{i}", lambda a: "x", input_schema={"type": "object"})
            changed = "notifications/tools/list_changed"
            await until(lambda: "s_t29" in parent.tools and any(n["method"] == changed for n in client.notifications))
            await asyncio.sleep(0.3)  # anything else on its way
            assert sum(n["method"] == changed for n in client.notifications) == 1
            assert len(await client.list_tools()) == 31
            client.notifications.clear()
            upstream.close()
            await until(lambda: any(n["method"] == changed for n in client.notifications))
            await asyncio.sleep(0.3)
            assert sum(n["method"] == changed for n in client.notifications) == 1
            assert await client.list_tools() == []
    finally:
        close_all(parent)


@aio
async def test_an_upstreams_flood_of_list_changed_is_listed_and_passed_on_at_a_bounded_rate() -> None:
    # each list_changed an upstream sent was a tools/list to it and a list_changed to every client,
    # whether anything changed or not: 50 a second kept the proxy busy and its clients re-listing
    proxy = Server.proxy([sys.executable, HOSTILE], env={"HOSTILE": "churn"})
    changed = "notifications/tools/list_changed"
    try:
        async with Client(proxy) as client:
            await client.list_tools()
            client.notifications.clear()
            # a burst, then a steady stream: 100 a second for 2 s
            await client.call_tool("churn", {"n": 2000})
            await asyncio.sleep(0.5)
            await client.call_tool("churn", {"n": 200, "gap": 0.01})
            await asyncio.sleep(3)  # the flood, the re-listings it set off and their notifications
            listed = int((await client.call_tool("lists", {}))["content"][0]["text"])
            # at most one listing, and one list_changed passed on, per half second (RELIST_INTERVAL)
            assert listed <= 1 + 10, f"the upstream was listed {listed} times for one flood"
            passed_on = sum(n["method"] == changed for n in client.notifications)
            assert passed_on <= 10, f"{passed_on} list_changed passed on for one flood"
            client.notifications.clear()
            await asyncio.sleep(RELIST_INTERVAL)
            # a real change still reaches the clients, once
            await client.call_tool("grow", {})
            await until(lambda: any(n["method"] == changed for n in client.notifications))
            await asyncio.sleep(0.3)
            assert sum(n["method"] == changed for n in client.notifications) == 1
            assert "grown" in [t["name"] for t in await client.list_tools()]
    finally:
        close_all(proxy)
