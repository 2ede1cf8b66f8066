"""The HTTP app's graceful shutdown in-process (transports/http_drain.py), and the stream of a
request the client cancelled: streams that must end although no answer ends them.

The process-level side (real signals, uvicorn, exit codes) is tests/reliability/test_shutdown.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from mcpkit import Server
from tests.test_http import STEP, aio, call, error_reply, init_params, jsonrpc
from tests.test_http import clients  # noqa: F401  (a fixture)


def slow_server() -> tuple[Server, asyncio.Event]:
    """``wait`` runs until ``released`` is set; ``add`` answers at once."""
    server = Server("slow", "1.0")
    released = asyncio.Event()

    @server.tool
    async def wait() -> str:
        """Waits until the test lets it go."""
        await released.wait()
        return "released"

    @server.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return server, released


def answers(messages: list[Any]) -> list[Any]:
    return [m for m in messages if "method" not in m]


async def cancel(client: Any, request_id: Any) -> None:
    reply = await client.post(jsonrpc("notifications/cancelled", {"requestId": request_id, "reason": "enough"}))
    assert reply.status == 202, reply.status


# ============================================================================ a cancelled request (CN-01)


@aio
@pytest.mark.req("CN-01", "HL-08")
async def test_the_stream_of_a_cancelled_request_ends_without_an_answer(clients):
    server, _ = slow_server()
    client = clients.asgi(clients.app(server))
    await client.initialize()
    reply = await client.post(call("wait", id=5))
    assert reply.content_type == "text/event-stream"
    assert (await reply.next_event()).data == ""  # primed: the request runs
    await cancel(client, 5)
    assert answers([client.event_message(e) for e in await reply.events() if e.data]) == []  # ended, unanswered
    assert await client.tool("add", {"a": 2, "b": 3}) == {"content": [{"type": "text", "text": '{"result":5}'}],
                                                        "structuredContent": {"result": 5}}


@aio
@pytest.mark.req("CN-01", "HL-04")
async def test_a_json_body_whose_request_was_cancelled_gets_202(clients):
    server, _ = slow_server()
    client = clients.asgi(clients.app(server, json_response=True))
    await client.initialize()
    reply = asyncio.ensure_future(client.post(call("wait", id=6)))
    app = client.driver.app
    while not any(hs.session.in_flight for hs in app.sessions.values()):
        await asyncio.sleep(0)  # the POST's headers come only with its body: wait until it runs
    await cancel(client, 6)
    done = await asyncio.wait_for(reply, STEP)
    assert done.status == 202 and await done.read() == b""


@aio
@pytest.mark.req("CN-01", "HL-03")
async def test_a_batch_with_a_cancelled_member_ends_with_the_other_answers(clients):
    server, _ = slow_server()
    client = clients.asgi(clients.app(server), revision="2025-03-26")
    await client.initialize()
    reply = await client.post([call("wait", id=7), call("add", {"a": 1, "b": 1}, id=8)])
    await cancel(client, 7)
    [batch] = [json.loads(e.data) for e in await reply.events() if e.data]
    assert [m["id"] for m in batch] == [8]

    reply = await client.post([call("wait", id=10), call("wait", id=11)])
    await cancel(client, 10)
    await cancel(client, 11)
    assert [e for e in await reply.events() if e.data] == []  # nothing to answer: the stream just ends
    assert client.driver.app.sessions[client.session_id].by_request == {}  # ids 10 and 11 are free again


# ============================================================================ drain and deadline


@aio
@pytest.mark.req("HL-12", "HL-08")
async def test_drain_ends_the_get_stream_at_once_and_lets_a_call_finish(clients):
    server, released = slow_server()
    app = clients.app(server)
    client = clients.asgi(app)
    await client.initialize()
    listening = await client.get()
    assert (await listening.next_event()).data == ""
    running = await client.post(call("wait", id=9))
    assert (await running.next_event()).data == ""

    app.drain(STEP)
    assert await listening.events() == []  # the GET stream ended, with nothing more on it
    again = await client.get()
    error = await error_reply(client, again, 503)
    assert error["message"] == "The server is shutting down; connect again."
    assert not running.ended  # the call still runs, on its open stream (HL-08)
    released.set()
    [answer] = answers([client.event_message(e) for e in await running.events()])
    assert answer == {"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": "released"}]}}


@aio
@pytest.mark.parametrize("mode", ["sse", "json", "stateless"])
async def test_past_the_deadline_a_call_still_running_is_answered_with_an_error(clients, mode):
    server, _ = slow_server()
    app = clients.app(server, json_response=mode == "json", stateless=mode == "stateless")
    client = clients.asgi(app)
    await client.initialize()
    pending = asyncio.ensure_future(client.call("tools/call", {"name": "wait", "arguments": {}}))
    while not any(hs.session.in_flight for hs in [*app.sessions.values(), *app._passing]):
        await asyncio.sleep(0)
    app.drain(0)
    answer = await asyncio.wait_for(pending, STEP)
    assert answer["error"]["code"] == -32603
    assert answer["error"]["message"] == ("The server is shutting down and the request did not finish in time; "
                                          "send it again.")
    await asyncio.sleep(0)
    assert app.sessions == {}  # closed after their answers
    refused = await client.post(call("add", {"a": 1, "b": 2}, id=99))
    await error_reply(client, refused, 503)


@aio
@pytest.mark.req("HX-03")
async def test_drain_ends_a_legacy_stream_once_its_requests_are_answered(clients):
    server, released = slow_server()
    app = clients.app(server)
    client = clients.asgi(app, revision="2024-11-05")
    driver = client.driver
    idle = await driver.open("GET", "/sse", {"accept": "text/event-stream"})
    busy = await driver.open("GET", "/sse", {"accept": "text/event-stream"})
    endpoints = [(await s.next_event()).data for s in (idle, busy)]
    assert all(re.fullmatch(r"/messages/\?session_id=[0-9a-f]{32}", e or "") for e in endpoints)

    async def send(message: dict[str, Any]) -> None:
        reply = await driver.open("POST", endpoints[1], {"content-type": "application/json"},
                                  json.dumps(message).encode())
        assert reply.status == 202

    await send(jsonrpc("initialize", init_params("2024-11-05"), 1))
    assert (await busy.next_event()).json()["id"] == 1
    await send(jsonrpc("notifications/initialized"))
    await send(call("wait", id=2))
    while not app.legacy[endpoints[1].rsplit("=", 1)[1]].session.in_flight:
        await asyncio.sleep(0)

    app.drain(STEP)
    assert await idle.events() == []
    assert not busy.ended
    released.set()
    assert [e.json()["id"] for e in await busy.events()] == [2]  # the answer, then the end
