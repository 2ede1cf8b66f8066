"""The client never stops listening unsaid: Streamable HTTP's GET stream is reopened after a 503,
a cut or a failover and resumed from its Last-Event-ID (HL-14); when the server refuses it for
good (405, 404, ...) the application is told through ``on_stream_state`` / ``stream_state`` and
the ``mcpkit.client`` logger; a call whose response stream breaks is resumed past a 503 and fails
at once, not at its timeout, when nothing can be resumed.

Failures are injected in front of a real mcpkit HTTP app (faulty_http.py), or are real: a
``mcpkit serve --http`` killed and started again on the same port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.client import Backoff, Client, ClientError, ClientTimeout, StreamState
from mcpkit.client.http import MAX_RESUMES
from mcpkit.client.listening import retry_after
from tests.client.faulty_http import PASS, Cut, FaultyHttp, Recorder, Refuse, Seen
from tests.client.servers import reference_http
from tests.conftest import mcpkit_command
from tests.test_http import free_port, stop_server, wait_listening

aio = pytest.mark.asyncio
#: reconnect within tenths of a second, so that each test is done in a few seconds
FAST = Backoff(first=0.02, cap=0.1)
WATCHED = "test://status"


def make_server(released: asyncio.Event | None = None) -> Server:
    server = Server("listening", "1")

    @server.resource(WATCHED)
    def status() -> str:
        return "ok"

    @server.tool(read_only=True, open_world=False)
    async def slow(ctx: Context) -> str:
        """Reports progress, then answers once the test releases it."""
        await ctx.report_progress(0, 1, "started")
        assert released is not None
        await released.wait()
        return "done"

    return server


def first(state: str) -> Callable[[list[StreamState]], StreamState | None]:
    return lambda seen: next((s for s in seen if s.state == state), None)


def updated_uris(messages: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["uri"] for m in messages if m["method"] == "notifications/resources/updated"]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mcpkit.client" and r.levelno >= logging.WARNING]


@dataclass
class Listening:
    server: Server
    http: FaultyHttp
    client: Client
    states: Recorder
    notes: Recorder

    def publish(self, name: str) -> None:
        self.server.notify_resource_updated(f"{WATCHED}/{name}")

    async def received(self, count: int) -> None:
        await self.notes.wait_for(lambda seen: len(updated_uris(seen)) >= count)


@contextlib.asynccontextmanager
async def listening(*gets: Any) -> AsyncIterator[Listening]:
    """A client subscribed to WATCHED and listening, behind a gate that does ``gets`` to its GETs
    in turn, then lets them through."""
    plan = iter(gets)
    server = make_server()
    states, notes = Recorder(), Recorder()
    async with FaultyHttp(server, lambda seen: next(plan, PASS) if seen.method == "GET" else PASS,
                          retry_ms=20) as http:
        async with Client(http.url, on_stream_state=states, on_notification=notes, reconnect=FAST) as client:
            await client.subscribe(WATCHED)
            await states.wait_for(first("listening"))
            yield Listening(server, http, client, states, notes)


@aio
async def test_the_get_stream_is_reopened_after_a_503_and_a_cut_and_resumed_from_its_last_event_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # GET 1: 503 with Retry-After; GET 2: cut when the second update comes, which is lost in
    # flight; GET 3 must ask for what followed the first update, and gets the second replayed
    async with listening(Refuse(503, (("retry-after", "1"),)), Cut(after=1, lose_next=True)) as it:
        for n, name in enumerate("abc", 1):
            it.publish(name)
            await it.received(n)
        assert it.client.stream_state == StreamState("listening", f"GET {it.http.url}", status=200)
    assert updated_uris(it.notes.seen) == [f"{WATCHED}/a", f"{WATCHED}/b", f"{WATCHED}/c"]
    one, two, three = it.http.gets()[:3]
    assert (one.status, two.status, three.status) == (503, 200, 200)
    assert "last-event-id" not in one.headers and "last-event-id" not in two.headers
    assert three.headers["last-event-id"] == two.event_ids[-1]  # the first update's
    # the 503 was reported with the wait its Retry-After asked for (longer than the backoff's)
    retrying = it.states.seen[0]
    assert (retrying.state, retrying.status, retrying.attempt, retrying.retry_in) == ("retrying", 503, 1, 1.0)
    assert [s.state for s in it.states.seen] == ["retrying", "listening"]  # the cut was resumed quietly
    said = warnings_of(caplog)
    assert len(said) == 2 and "retrying in 1.0 s" in said[0] and "got HTTP 503" in said[0]
    assert said[1].startswith("listening to the server again")


@aio
async def test_a_refused_last_event_id_is_dropped_and_the_stream_reopened_afresh(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with listening(Cut(after=1), Refuse(404)) as it:
        it.publish("a")
        await it.received(1)
        # the cut, the refused resumption, the fresh stream
        await it.http.requests.wait_for(lambda seen: len(it.http.gets()) >= 3)
        it.publish("b")
        await it.received(2)
        assert await it.client.ping() == {}
    one, two, three = it.http.gets()[:3]
    assert (two.status, three.status) == (404, 200)
    assert two.headers["last-event-id"] == one.event_ids[-1] and "last-event-id" not in three.headers
    assert [s.state for s in it.states.seen] == ["listening"]
    said = warnings_of(caplog)
    assert len(said) == 1 and "could not be resumed after event" in said[0]


@aio
async def test_a_session_lost_in_a_server_restart_is_reported_and_ends_the_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    argv = mcpkit_command("serve", "--http", f"127.0.0.1:{port}")
    loop = asyncio.get_running_loop()

    async def serve() -> subprocess.Popen[bytes]:
        errlog = tempfile.TemporaryFile()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
        proc.errlog = errlog  # type: ignore[attr-defined]  # what stop_server reads back
        await loop.run_in_executor(None, wait_listening, proc, port)
        return proc

    states = Recorder()
    old = await serve()
    try:
        async with Client(f"http://127.0.0.1:{port}/mcp", on_stream_state=states, reconnect=FAST) as client:
            await states.wait_for(first("listening"))
            old.kill()  # a crash, or a failover to a server that never knew the session
            await loop.run_in_executor(None, old.wait)
            await states.wait_for(first("retrying"))
            new = await serve()
            try:
                stopped = await states.wait_for(first("stopped"), timeout=20)
                with pytest.raises(ClientError) as err:
                    await client.ping()
            finally:
                stop_server(new)
    finally:
        stop_server(old)
    assert stopped.status == 404 and "has ended on the server" in stopped.reason
    assert "open a new Client" in stopped.reason
    assert err.value.status == 404 and str(err.value) == stopped.reason
    assert client.stream_state is stopped
    said = warnings_of(caplog)
    assert "not listening to the server" in said[0] and said[-1] == f"stopped listening to the server: {stopped.reason}"


@aio
async def test_a_server_without_a_get_stream_is_neither_retried_nor_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    states = Recorder()
    with reference_http("--stateless") as base:
        async with Client(f"{base}/mcp", on_stream_state=states, reconnect=FAST) as client:
            state = await states.wait_for(first("unsupported"))
            # the listening task has ended: nothing can retry
            await asyncio.wait_for(asyncio.gather(*client.transport._tasks), 5)  # type: ignore[attr-defined]
            assert await client.ping() == {}
    assert states.seen == [state] and state.status == 405
    assert client.transport.standalone_status == 405  # type: ignore[attr-defined]
    assert warnings_of(caplog) == []


@aio
async def test_a_call_whose_stream_breaks_is_resumed_past_a_503() -> None:
    released = asyncio.Event()
    resumptions = iter([Refuse(503), PASS])
    calling = False

    def plan(seen: Seen) -> Any:
        if seen.method == "GET":  # no GET stream here: the only GETs are resumptions
            return next(resumptions) if "last-event-id" in seen.headers else Refuse(405)
        return Cut(after=1, abort=True) if calling else PASS  # broken after the progress notification

    progress = Recorder()
    async with FaultyHttp(make_server(released), plan, retry_ms=20) as http:
        async with Client(http.url, reconnect=FAST) as client:
            calling = True
            call = asyncio.ensure_future(client.call_tool("slow", progress=lambda *a: progress(a)))
            await progress.wait_for(len)
            released.set()
            result = await asyncio.wait_for(call, 10)
    assert result["content"] == [{"type": "text", "text": "done"}]
    post = [r for r in http.requests.seen if r.method == "POST"][-1]
    resumed = [g for g in http.gets() if "last-event-id" in g.headers]
    assert [g.status for g in resumed] == [503, 200]
    assert {g.headers["last-event-id"] for g in resumed} == {post.event_ids[-1]}  # the progress event's
    assert progress.seen == [(0, 1, "started")]


@aio
async def test_a_call_whose_stream_cannot_be_resumed_fails_without_waiting_for_its_timeout() -> None:
    calling = False

    def plan(seen: Seen) -> Any:
        if seen.method == "GET":
            return Refuse(503) if "last-event-id" in seen.headers else Refuse(405)
        return Cut(after=1) if calling else PASS

    progress = Recorder()
    async with FaultyHttp(make_server(asyncio.Event()), plan, retry_ms=20) as http:
        async with Client(http.url, reconnect=FAST, timeout=60) as client:
            calling = True
            with pytest.raises(ClientError) as err:
                await asyncio.wait_for(client.call_tool("slow", progress=lambda *a: progress(a)), 30)
    assert not isinstance(err.value, ClientTimeout)
    assert f"{MAX_RESUMES} attempts in a row to resume it" in str(err.value)
    assert len([g for g in http.gets() if "last-event-id" in g.headers]) == MAX_RESUMES


@aio
async def test_the_end_of_a_legacy_sse_stream_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    states = Recorder()
    async with FaultyHttp(make_server()) as http:
        url = http.url.replace("/mcp", "/sse")
        async with Client(url, transport="sse", protocol_version="2024-11-05", on_stream_state=states) as client:
            await states.wait_for(first("listening"))
            http.app.close_all()  # the server ends the stream, and the session with it
            stopped = await states.wait_for(first("stopped"))
            with pytest.raises(ClientError, match="ended"):
                await client.ping()
    assert f"the SSE stream from {url} ended" in stopped.reason and "open a new Client" in stopped.reason
    assert warnings_of(caplog) == [f"stopped listening to the server: {stopped.reason}"]


def test_the_backoff_grows_to_its_cap_with_jitter_below_each_step() -> None:
    backoff = Backoff(first=0.5, cap=30.0, factor=2.0, jitter=0.5)
    for attempt, step in [(1, 0.5), (2, 1.0), (3, 2.0), (7, 30.0), (10_000, 30.0)]:
        delays = {backoff.delay(attempt) for _ in range(50)}
        assert all(step / 2 <= d <= step for d in delays), (attempt, delays)
        assert len(delays) > 1  # jittered: clients of one failed server do not come back together
    assert Backoff(first=0.1, jitter=0.0).delay(3) == pytest.approx(0.4)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past: at once
    assert 3590 < retry_after({"retry-after": format_datetime(datetime.now(timezone.utc) + timedelta(hours=1),
                                                              usegmt=True)}) <= 3600
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None
