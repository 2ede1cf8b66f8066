"""A stream resumed on another process carries on: two ``mcpkit serve --http`` processes on one
Redis, a client whose process was killed (SIGKILL) or that a balancer moved, resuming with
``Last-Event-ID`` on the other (HL-14). Its GET stream stays open and receives every later
notification once; the answer of a call in flight arrives when its process lives on, and is a
retryable error once that process is gone."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.scaleout.test_two_processes import joined, pair, processes
from tests.test_http import call, jsonrpc

#: a short lease, so a killed process is known dead within about a second
LEASE = "&task_lease=1&task_renew=0.25"
#: bound on what a resumed stream waits for (the lease, and a few reads of the store)
DEADLINE = 8.0
#: resource updates published after the resumption
UPDATES = 6


@pytest.fixture
def two(redis_url: str) -> Iterator[list[Any]]:
    """Two processes for one test (it may kill the first)."""
    with processes(redis_url, query=LEASE) as started:
        yield started


async def session_on_both(clients: Any, two: list[Any]) -> tuple[Any, Any, Any]:
    """Process A, and clients of one session on A and on B."""
    (proc_a, a_port), (_, b_port) = two
    a, b = pair(clients, (a_port, b_port))
    await joined(a, b)
    return proc_a, a, b


async def updates_until(client: Any, stream: Any, sentinel: str) -> list[str]:
    """The URIs of the resource updates a stream receives, up to the one of ``sentinel``
    (``stream.last_id``: the id of that one)."""
    seen: list[str] = []
    deadline = time.monotonic() + DEADLINE
    while sentinel not in seen:
        assert time.monotonic() < deadline, seen
        event = await stream.next_event(timeout=DEADLINE)
        assert event is not None, f"the resumed stream ended after {seen}"
        message = client.event_message(event)
        if message and message.get("method") == "notifications/resources/updated":
            seen.append(message["params"]["uri"])
            stream.last_id = event.id
    return seen


async def opened_on_a(a: Any) -> tuple[Any, str]:
    """A's GET stream, subscribed to note://shared, after two updates: the id of the first."""
    await a.result("resources/subscribe", {"uri": "note://shared"})
    stream = await a.get()
    assert stream.status == 200
    await a.tool("touch", {"uri": "note://shared"})
    await a.tool("touch", {"uri": "note://shared"})
    ids = []
    while len(ids) < 2:
        event = await stream.next_event()
        assert event is not None
        if event.data:
            ids.append(event.id)
    return stream, ids[0]


@pytest.mark.req("HL-14")
@pytest.mark.reliability
@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["killed", "moved"])
async def test_a_get_stream_resumed_on_the_other_process_stays_open_and_misses_nothing(two, clients, how):
    proc_a, a, b = await session_on_both(clients, two)
    stream, first = await opened_on_a(a)
    if how == "killed":
        proc_a.send_signal(signal.SIGKILL)
        proc_a.wait(10)
        publishers = [b]
    else:
        await stream.disconnect()
        publishers = [a, b]  # the client moved; A lives on and publishes too
    resumed = await b.get(last_event_id=first)
    assert resumed.status == 200
    assert await updates_until(b, resumed, "note://shared") == ["note://shared"]  # the replay
    for i in range(UPDATES):
        await publishers[i % len(publishers)].tool("touch", {"uri": "note://shared"})
    await b.result("resources/subscribe", {"uri": "note://other"})
    await b.tool("touch", {"uri": "note://other"})
    # every later update, once each, and the stream still open after them
    assert await updates_until(b, resumed, "note://other") == ["note://shared"] * UPDATES + ["note://other"]
    assert not resumed.ended
    await resumed.disconnect()
    if how == "moved":
        # and back to A: what A's copy would have queued meanwhile was delivered on B, not again
        back = await a.get(last_event_id=resumed.last_id)
        assert back.status == 200
        await b.tool("touch", {"uri": "note://other"})
        assert await updates_until(a, back, "note://other") == ["note://other"]
        await back.disconnect()


async def in_flight_on_a(a: Any, seconds: float, rid: int) -> str:
    """A slow call on A; the id of its stream's first event (the priming one)."""
    reply = await a.post(call("job", {"seconds": seconds}, id=rid))
    assert reply.status == 200 and reply.content_type.startswith("text/event-stream")
    priming = await reply.next_event()
    assert priming is not None and priming.id
    await reply.disconnect()
    return priming.id


async def resumed_on(client: Any, last: str) -> list[Any]:
    """The messages of a stream resumed on ``client``'s process, read to its end (bounded)."""
    started = time.monotonic()
    resumed = await client.get(last_event_id=last)
    assert resumed.status == 200
    messages = [m for m in [client.event_message(e) for e in await resumed.events()] if m is not None]
    assert time.monotonic() - started < DEADLINE
    return messages


@pytest.mark.req("HL-14")
@pytest.mark.reliability
@pytest.mark.asyncio
async def test_a_call_in_flight_on_a_killed_process_is_answered_with_a_retryable_error(two, clients):
    proc_a, a, b = await session_on_both(clients, two)
    last = await in_flight_on_a(a, 60, 41)
    proc_a.send_signal(signal.SIGKILL)
    proc_a.wait(10)
    messages = await resumed_on(b, last)
    assert len(messages) == 1, messages
    error = messages[0]["error"]
    assert messages[0]["id"] == 41
    assert error["code"] == -32603
    assert error["data"] == {"code": "E_INTERRUPTED", "retryable": True, "suggestedFix": "Send the request again."}
    assert "stopped before it answered" in error["message"]
    # stored like any answer: resuming again replays it
    assert await resumed_on(b, last) == messages


@pytest.mark.req("HL-14")
@pytest.mark.reliability
@pytest.mark.asyncio
async def test_a_call_in_flight_resumed_on_the_other_process_gets_its_answer_from_the_owner(two, clients):
    _, a, b = await session_on_both(clients, two)
    last = await in_flight_on_a(a, 1.5, 42)
    answer = {"content": [{"type": "text", "text": "done after 1.5 s"}]}
    assert await resumed_on(b, last) == [{"jsonrpc": "2.0", "id": 42, "result": answer}]  # A still ran it


@pytest.mark.req("HL-14", "CN-01")
@pytest.mark.reliability
@pytest.mark.asyncio
async def test_a_cancelled_call_resumed_on_the_other_process_is_never_answered(two, clients):
    _, a, b = await session_on_both(clients, two)
    last = await in_flight_on_a(a, 60, 43)
    cancel = await a.post(jsonrpc("notifications/cancelled", {"requestId": 43, "reason": "changed my mind"}))
    assert cancel.status == 202
    # neither an answer nor, once A's lease lapses with nothing left to hold, an error (CN-01)
    assert await resumed_on(b, last) == []
