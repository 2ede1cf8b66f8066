"""Load and soak: many calls, many abandoned sessions, and clients that stop reading.

Memory is the server process's resident set (VmRSS of /proc/PID/status), read at two points of
each run; the bounds are generous (a leak of what the run handled would exceed them several
times over) and every figure is recorded (conftest.py: printed, and written as JSON).
"""

from __future__ import annotations

import fcntl
import http.client
import json
import socket
import struct
import subprocess
import tempfile
import termios
import threading
import time
from typing import Any

import pytest

from tests.conftest import mcpkit_command
from tests.reliability.support import (
    PROBE,
    REVISION,
    STEP,
    HttpClient,
    HttpServer,
    MiB,
    assert_healthy,
    has_traceback,
    init_message,
    rss_kib,
    threads,
    wait_for,
)
from tests.test_stdio import ServerProcess

pytestmark = pytest.mark.reliability

KiB_PER_MiB = 1024


def mib(kib: int) -> float:
    return round(kib / KiB_PER_MiB, 1)


# ============================================================================ 100,000 calls over stdio


CALLS = 100_000
FIRST = 10_000
CHUNK = 1_000  # lines per write: the client pipelines, it never waits for an answer to send more
RSS_GROWTH_BOUND = 30 * MiB


def _add_lines(start: int, stop: int) -> bytes:
    return b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"add","arguments":{"a":%d,"b":%d}}}\n'
        % (n, n, 2 * n) for n in range(start, stop)
    )


def _pipeline(server: ServerProcess, start: int, stop: int, seen: bytearray) -> None:
    """Write calls start..stop in chunks from a thread while this one reads every answer."""

    def write() -> None:
        for at in range(start, stop, CHUNK):
            server.write(_add_lines(at, min(at + CHUNK, stop)))

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    for _ in range(stop - start):
        line = server.read_line(timeout=STEP)  # a hang guard per answer
        assert line is not None, f"the server closed stdout; stderr:\n{server.stderr()[-2000:]}"
        message = json.loads(line)
        n = message["id"]
        assert start <= n < stop and not seen[n], f"unexpected or repeated answer: {message}"
        seen[n] = 1
        assert message["result"]["structuredContent"] == {"result": 3 * n}, message
    writer.join(STEP)
    server.raw_lines.clear()


@pytest.mark.req("BP-05", "ST-01")
def test_100000_pipelined_calls_over_stdio_each_answered_once_in_flat_memory(figures):
    server = ServerProcess(mcpkit_command("serve"))
    try:
        server.initialize(REVISION)
        seen = bytearray(CALLS)
        started = time.monotonic()
        _pipeline(server, 0, FIRST, seen)
        after_first = rss_kib(server.proc.pid)
        _pipeline(server, FIRST, CALLS, seen)
        elapsed = time.monotonic() - started
        after_all = rss_kib(server.proc.pid)
        assert all(seen), "some calls were never answered"
        server.ping()
        figures.record(
            "stdio_100k_add_calls",
            calls=CALLS, seconds=round(elapsed, 2), calls_per_second=round(CALLS / elapsed),
            rss_after_10k_mib=mib(after_first), rss_after_100k_mib=mib(after_all),
            rss_growth_mib=mib(after_all - after_first),
        )
        assert (after_all - after_first) * 1024 < RSS_GROWTH_BOUND, (after_first, after_all)
        assert server.finish() == 0
        assert not has_traceback(server.stderr()), server.stderr()[-3000:]
    finally:
        server.kill()


# ============================================================================ 10,000 abandoned HTTP sessions


SESSIONS = 10_000
MAX_SESSIONS = 1_000
WORKERS = 4
SESSIONS_GROWTH_BOUND = 10 * MiB  # a session costs a few KiB: keeping 9,000 evicted ones would cost far more


class SessionOpener:
    """A keep-alive connection that opens sessions one after another and never ends them."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=STEP)

    def post(self, message: dict[str, Any], session_id: str | None) -> tuple[int, str | None, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if session_id is not None:
            headers |= {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": REVISION}
        self.conn.request("POST", "/mcp", body=json.dumps(message), headers=headers)
        response = self.conn.getresponse()
        return response.status, response.getheader("mcp-session-id"), response.read()

    def session(self) -> str:
        status, sid, body = self.post(init_message(1), None)
        assert status == 200 and sid and b'"result"' in body, (status, body[:300])
        status, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        assert status == 202
        status, _, body = self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                     "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}, sid)
        assert status == 200 and b'{\\"result\\":5}' in body, (status, body[:300])
        return sid

    def close(self) -> None:
        self.conn.close()


def open_sessions(openers: list[SessionOpener], count: int) -> list[str]:
    ids: list[str] = []
    errors: list[BaseException] = []

    def run(opener: SessionOpener, n: int) -> None:
        try:
            for _ in range(n):
                ids.append(opener.session())
        except BaseException as exc:  # noqa: BLE001 - raised below, in the test's thread
            errors.append(exc)

    shares = [count // len(openers) + (i < count % len(openers)) for i in range(len(openers))]
    workers = [threading.Thread(target=run, args=(o, n)) for o, n in zip(openers, shares, strict=True)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return ids


@pytest.mark.req("HL-15", "HL-17")
def test_10000_abandoned_http_sessions_keep_memory_flat(figures):
    server = HttpServer("--max-sessions", str(MAX_SESSIONS))
    openers = [SessionOpener(server.port) for _ in range(WORKERS)]
    try:
        idle = rss_kib(server.pid)
        started = time.monotonic()
        first_ids = open_sessions(openers, MAX_SESSIONS)  # the cap is reached
        at_cap = rss_kib(server.pid)
        open_sessions(openers, SESSIONS - MAX_SESSIONS)
        elapsed = time.monotonic() - started
        after = rss_kib(server.pid)
        # the oldest sessions were ended to make room (HL-17: 404 from then on); new ones still work
        with HttpClient(server.url) as client:
            client.session_id = first_ids[0]
            assert client.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 404
        assert_healthy(server.url)
        figures.record(
            "http_10k_abandoned_sessions",
            sessions=SESSIONS, max_sessions=MAX_SESSIONS, seconds=round(elapsed, 2),
            sessions_per_second=round(SESSIONS / elapsed), rss_idle_mib=mib(idle),
            rss_after_1k_mib=mib(at_cap), rss_after_10k_mib=mib(after), rss_growth_mib=mib(after - at_cap),
        )
        assert (after - at_cap) * 1024 < SESSIONS_GROWTH_BOUND, (at_cap, after)
    finally:
        for opener in openers:
            opener.close()
        stderr = server.stop()
    assert not has_traceback(stderr), stderr[-3000:]


# ============================================================================ a standalone SSE stream nobody reads


FLOODS = 5
PER_FLOOD = 40_000
SLOW_GET_BOUND = 16 * MiB


@pytest.mark.req("HL-12", "HL-13")
def test_a_get_stream_that_is_never_read_keeps_the_server_bounded_and_serving(figures):
    server = HttpServer(target=PROBE)
    reader = socket.socket()
    try:
        with HttpClient(server.url) as slow, HttpClient(server.url) as busy:
            slow.initialize()
            assert "result" in slow.call("resources/subscribe", {"uri": "probe://feed"})
            # the slow client opens its standalone stream, reads the response head, then stops reading
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader.connect(("127.0.0.1", server.port))
            reader.sendall(
                f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n"
                f"Mcp-Session-Id: {slow.session_id}\r\nMCP-Protocol-Version: {REVISION}\r\n\r\n".encode()
            )
            reader.settimeout(STEP)
            assert reader.recv(4096).startswith(b"HTTP/1.1 200")
            busy.initialize()
            idle = rss_kib(server.pid)
            # warm-up: the first flood fills the socket buffers and the allocator's pools
            assert busy.tool("flood", {"count": PER_FLOOD})["structuredContent"] == {"result": PER_FLOOD}
            before = rss_kib(server.pid)
            started = time.monotonic()
            for _ in range(FLOODS - 1):
                assert busy.tool("flood", {"count": PER_FLOOD})["structuredContent"] == {"result": PER_FLOOD}
                assert_healthy(server.url)  # others are served meanwhile
            elapsed = time.monotonic() - started
            after = rss_kib(server.pid)
            # the slow client reads again: its stream still works (the oldest undelivered events
            # were dropped to keep memory flat; a 1000-event backlog is kept)
            got = b""
            while got.count(b"notifications/resources/updated") < 1000:
                chunk = reader.recv(1 << 16)
                assert chunk, "the stream ended"
                got += chunk
            event_bytes = len(got) / got.count(b"notifications/resources/updated")
            figures.record(
                "http_unread_get_stream",
                notifications=FLOODS * PER_FLOOD, sse_mib_offered=round(FLOODS * PER_FLOOD * event_bytes / MiB, 1),
                seconds_for_the_last_4_floods=round(elapsed, 2), rss_before_warmup_mib=mib(idle),
                rss_after_warmup_mib=mib(before), rss_after_mib=mib(after), rss_growth_mib=mib(after - before),
            )
            assert (after - before) * 1024 < SLOW_GET_BOUND, (before, after)
    finally:
        reader.close()
        stderr = server.stop()
    assert not has_traceback(stderr), stderr[-3000:]


# ============================================================================ a POST stream nobody reads


CHATTER_LINES = 20_000
POST_STREAM_BOUND = 24 * MiB


@pytest.mark.req("HL-06", "HL-08")
def test_a_post_stream_that_is_never_read_keeps_the_server_bounded_and_still_answers(figures):
    """A client that sends a call, reads the response head and stops reading, while the handler
    sends 20 MB of log messages on the call's stream: the messages waiting for it are bounded (the
    oldest progress and log notifications give way), the call's answer is never one of them, and
    other clients are served meanwhile."""
    server = HttpServer(target=PROBE)
    reader = socket.socket()
    try:
        with HttpClient(server.url) as slow, HttpClient(server.url) as busy:
            slow.initialize()
            busy.initialize()
            idle = rss_kib(server.pid)
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader.connect(("127.0.0.1", server.port))
            body = json.dumps({"jsonrpc": "2.0", "id": "chatter", "method": "tools/call",
                               "params": {"name": "chatter", "arguments": {"count": CHATTER_LINES, "size": 1000}}})
            reader.sendall(
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nMcp-Session-Id: {slow.session_id}\r\n"
                f"MCP-Protocol-Version: {REVISION}\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
            )
            reader.settimeout(STEP)
            assert reader.recv(256).startswith(b"HTTP/1.1 200")
            # the handler runs on while nobody reads, others served meanwhile, until the memory
            # it takes settles (or grows past any bound: the assertion below says so)
            deadline = time.monotonic() + 60
            samples = [rss_kib(server.pid)]
            while time.monotonic() < deadline:
                assert_healthy(server.url)
                answer = busy.call("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
                assert answer["result"]["structuredContent"] == {"result": 3}
                time.sleep(0.5)
                samples.append(rss_kib(server.pid))
                if samples[-1] - idle > 3 * POST_STREAM_BOUND // 1024:
                    break
                if len(samples) > 6 and max(samples[-6:]) - min(samples[-6:]) < 1024:
                    break  # settled for 3 s
            after = max(samples)
            assert (after - idle) * 1024 < POST_STREAM_BOUND, (idle, after, server.stderr()[-1500:])
            # the client reads again: the stream goes on to the answer, which was never dropped
            got = bytearray()
            reader.settimeout(30)
            while b'"id":"chatter"' not in got:
                chunk = reader.recv(1 << 16)
                assert chunk, "the stream ended without the answer"
                got += chunk
            lines = got.count(b"notifications/message")
            figures.record("http_unread_post_stream", messages_sent=CHATTER_LINES, messages_delivered=lines,
                           rss_idle_mib=mib(idle), rss_after_mib=mib(after), rss_growth_mib=mib(after - idle))
            assert 0 < lines < CHATTER_LINES
    finally:
        reader.close()
        stderr = server.stop()
    assert not has_traceback(stderr), stderr[-3000:]


# ============================================================================ a stdio client that stops reading


def _stalled(counter: list[int]) -> bool:
    """True when the writer made no progress for half a second."""
    first = counter[0]
    time.sleep(0.5)
    return first > 0 and counter[0] == first


class StdioPeer:
    """A stdio server whose stdout this test reads only when it wants to (no reader thread)."""

    def __init__(self) -> None:
        self._errlog = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(mcpkit_command("serve", PROBE), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._errlog)
        self.written = [0]  # how many pipelined calls went out
        self.stop = threading.Event()
        self._writer: threading.Thread | None = None

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def initialize(self) -> None:
        self.send(init_message(0))
        assert json.loads(self.proc.stdout.readline())["id"] == 0  # type: ignore[union-attr]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # one call first: what the first call loads (validators, the event loop) is not growth
        self.send({"jsonrpc": "2.0", "id": "warm-up", "method": "tools/call",
                   "params": {"name": "blob", "arguments": {"size": 1}}})
        assert json.loads(self.proc.stdout.readline())["id"] == "warm-up"  # type: ignore[union-attr]

    def pipeline(self, lines: Any) -> None:
        """Write ``lines(start, stop)`` in chunks of 100 calls until stopped (blocking once the pipe is full)."""

        def run() -> None:
            try:
                while not self.stop.is_set():
                    n = self.written[0]
                    self.write(lines(n, n + 100))
                    self.written[0] = n + 100
            except (BrokenPipeError, ValueError):  # the test ended early and the process went away
                pass

        self._writer = threading.Thread(target=run, daemon=True)
        self._writer.start()

    def resume(self, until: str = "done", also: tuple[str, ...] = (), pipelined: bool = False) -> list[Any]:
        """Stop the writer, read again, and return everything up to the answer of a ping ``until``,
        the answers of the requests ``also`` and, with ``pipelined``, of every call the writer sent.
        Answers of different requests are not ordered: an async call may still be talking after
        the ping was answered, and a call set aside while every handler thread was blocked
        writing is answered after a ping read later, which needs no handler thread."""
        self.stop.set()
        lines: list[Any] = []
        seen: set[Any] = set()
        waiting: list[set[Any]] = [set()]  # filled before the ping goes out: the drainer needs it only after

        def read_all() -> None:
            while line := self.proc.stdout.readline():  # type: ignore[union-attr]
                message = json.loads(line)
                lines.append(message)
                if "method" not in message:
                    seen.add(message.get("id"))
                if until in seen and waiting[0] <= seen:
                    return

        drainer = threading.Thread(target=read_all, daemon=True)
        drainer.start()
        if self._writer is not None:
            self._writer.join(STEP)
            assert not self._writer.is_alive(), "the writer is still blocked"
        waiting[0] = {*also, *(range(self.written[0]) if pipelined else ())}
        self.send({"jsonrpc": "2.0", "id": until, "method": "ping"})
        drainer.join(60)  # a hang guard
        assert not drainer.is_alive(), f"stuck after {len(lines)} messages: {len(waiting[0] - seen)} answers missing"
        return lines

    def finish(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(STEP)

    def close(self) -> str:
        self.stop.set()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._errlog.seek(0)
        text = self._errlog.read().decode("utf-8", "replace")
        self._errlog.close()
        return text


BLOB = 2_000  # characters in each answer
SLOW_STDIO_BOUND = 16 * MiB
THREADS_BOUND = 16


def _blob_lines(start: int, stop: int) -> bytes:
    return b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"blob","arguments":{"size":%d}}}\n'
        % (n, BLOB) for n in range(start, stop)
    )


@pytest.mark.req("ST-01", "BP-05")
def test_a_stdio_client_that_stops_reading_stalls_the_server_in_bounded_memory(figures):
    peer = StdioPeer()
    try:
        peer.initialize()
        before = rss_kib(peer.proc.pid)
        # small requests, large answers, and nobody reads them: the server blocks writing, stops
        # reading stdin (backpressure), and then the client's writes stall too
        peer.pipeline(_blob_lines)
        assert wait_for(lambda: _stalled(peer.written), timeout=STEP), "the client's writes never stalled"
        during, during_threads = rss_kib(peer.proc.pid), threads(peer.proc.pid)
        lines = peer.resume(pipelined=True)
        answers = {m["id"]: m for m in lines if "id" in m}
        assert len(lines) == peer.written[0] + 1, "answers missing or repeated"
        assert all(answers[n]["result"]["content"][0]["text"] == "b" * BLOB for n in range(peer.written[0]))
        assert answers["done"] == {"jsonrpc": "2.0", "id": "done", "result": {}}
        figures.record(
            "stdio_unread_stdout",
            calls_before_the_client_stalled=peer.written[0], answer_bytes=BLOB,
            mib_answered=round(peer.written[0] * BLOB / MiB, 1),
            rss_before_mib=mib(before), rss_stalled_mib=mib(during), rss_growth_mib=mib(during - before),
            threads_stalled=during_threads,
        )
        assert (during - before) * 1024 < SLOW_STDIO_BOUND, (before, during)
        assert during_threads <= THREADS_BOUND, during_threads
        assert peer.finish() == 0
    finally:
        stderr = peer.close()
    assert not has_traceback(stderr), stderr[-3000:]


CHATTER = 40_000  # log messages of 1,000 characters: about 40 MB the server wants to write


def _ping_lines(start: int, stop: int) -> bytes:
    return b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n for n in range(start, stop))


def _unread(fd: int) -> int:
    """Bytes waiting in a pipe (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def test_a_stdio_client_that_stops_reading_during_async_output_keeps_the_thread_count_bounded(figures):
    peer = StdioPeer()
    samples: list[int] = []
    try:
        peer.initialize()
        peer.send({"jsonrpc": "2.0", "id": "chatter", "method": "tools/call",
                   "params": {"name": "chatter", "arguments": {"count": CHATTER, "size": 1000}}})
        # nobody reads: the tool's output fills the stdout pipe and its write blocks. A pipe is 16
        # pages: written a message (about 1 KB) at a time, as the tool now yields after each, three
        # fit a page, so a full pipe holds about 53 KB rather than 64 KiB
        stdout = peer.proc.stdout.fileno()  # type: ignore[union-attr]
        assert wait_for(lambda: _unread(stdout) >= 48_000, timeout=STEP), "the stdout pipe never filled"
        peer.write(_ping_lines(0, 200))  # then 200 small requests arrive (they fit in the stdin pipe)
        for _ in range(15):  # three seconds of a client that does not read
            samples.append(threads(peer.proc.pid))
            time.sleep(0.2)
        figures.record("stdio_unread_stdout_during_async_output", queued_requests=200, threads_sampled=samples)
        assert max(samples) <= THREADS_BOUND, samples
        lines = peer.resume(also=("chatter",))
        logs = [m for m in lines if m.get("method") == "notifications/message"]
        assert [m["params"]["data"]["n"] for m in logs] == list(range(CHATTER))
        assert peer.finish() == 0
    finally:
        peer.close()


HELD_BOUND = 32 * MiB


def test_pipelined_requests_for_large_answers_hold_bounded_memory_while_unread(figures):
    peer = StdioPeer()
    try:
        peer.initialize()
        before = rss_kib(peer.proc.pid)
        peer.write(b"".join(
            b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"blob","arguments":{"size":%d}}}\n'
            % (n, MiB) for n in range(64)
        ))  # 6 KiB of requests; nobody reads the answers yet
        assert wait_for(lambda: _rss_settled(peer.proc.pid), timeout=STEP)
        held = rss_kib(peer.proc.pid) - before
        figures.record("stdio_unread_large_answers", requests=64, answer_mib=1, rss_growth_mib=mib(held))
        assert held * 1024 < HELD_BOUND, mib(held)
    finally:
        peer.close()


def _rss_settled(pid: int) -> bool:
    first = rss_kib(pid)
    time.sleep(0.5)
    return abs(rss_kib(pid) - first) < 1024
