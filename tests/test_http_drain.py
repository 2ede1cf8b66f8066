"""The stream of a request the client cancelled: a stream that must end although no answer ends it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcpkit import Server
from tests.test_http import STEP, aio, call, jsonrpc
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
