"""Hostile connections to a real ``mcpkit serve --http`` (uvicorn): silent sockets, heads sent a
byte at a time, too many connections, heads over the size limit. The server closes what does not
become a request in time and stays healthy for everyone else.

Each limit is tried the ways a client can cut its bytes: in one write, in many small writes, and
on a kept-alive connection (after an answer, or pipelined behind another request): a limit that
only holds for one of them does not hold."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from collections.abc import Iterator

import pytest

from tests.reliability.support import (
    BOTH,
    STEP,
    HttpServer,
    Raw,
    assert_healthy,
    init_message,
    raw_exchange,
    serving,
)

pytestmark = pytest.mark.reliability

SILENT = 200  # connections that never say anything


@pytest.fixture(scope="module")
def served() -> Iterator[HttpServer]:
    with serving("--header-timeout", "1", "--max-connections", "100") as server:
        yield server


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closed ``sock`` within ``within`` seconds (EOF or reset on read)."""
    sock.settimeout(within)
    try:
        sock.recv(4096)  # b"" (EOF), or an answer such as 503 that precedes the close
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_silent_connections_are_closed_after_the_header_timeout(served):
    sockets = [socket.create_connection(("127.0.0.1", served.port), timeout=STEP) for _ in range(SILENT)]
    try:
        deadline = time.monotonic() + STEP
        still_open = []
        for sock in sockets:
            if not closed_by_server(sock, max(0.05, deadline - time.monotonic())):
                still_open.append(sock)
        assert not still_open, f"{len(still_open)} of {SILENT} silent connections were still open after {STEP} s"
        assert_healthy(served.url)
    finally:
        for sock in sockets:
            sock.close()


def test_a_head_sent_a_byte_at_a_time_does_not_hold_its_connection(served):
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=STEP)
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    deadline = time.monotonic() + STEP
    closed = False
    try:
        for byte in head * 50:
            if time.monotonic() > deadline:
                break
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.05)
        if not closed:
            closed = closed_by_server(sock, 1.0)
        assert closed, "a trickled request head kept its connection open"
    finally:
        sock.close()
    assert_healthy(served.url)


def test_the_serve_options_refuse_nonsense_with_one_line():
    import subprocess
    import sys

    for option in ("--header-timeout", "--body-timeout", "--max-connections"):
        proc = subprocess.run([sys.executable, "-m", "mcpkit", "serve", "--http", "127.0.0.1:1", option, "0"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0
        assert "Traceback" not in proc.stderr and f"{option} must be a positive" in proc.stderr, proc.stderr


# ============================================================================ request heads: --max-header-bytes

LIMIT = 1024  # --max-header-bytes of ``limited``
DEFAULT_LIMIT = 64 * 1024
UVICORN_400 = b"Invalid HTTP request received."  # uvicorn's answer to a refused head, then it closes


@pytest.fixture(scope="module")
def limited() -> Iterator[HttpServer]:
    with serving("--max-header-bytes", str(LIMIT)) as server:
        yield server


@pytest.fixture(scope="module")
def default() -> Iterator[HttpServer]:
    with serving() as server:
        yield server


def initialize(head_bytes: int | None = None, *, body: bytes | None = None, close: bool = True) -> bytes:
    """An initialize request whose head (request line to blank line) is ``head_bytes`` long."""
    body = json.dumps(init_message()).encode() if body is None else body
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: {BOTH}\r\n"
            f"Content-Length: {len(body)}\r\n" + ("Connection: close\r\n" if close else ""))
    if head_bytes is not None:
        head += "X-Pad: " + "p" * (head_bytes - len(head) - len("X-Pad: \r\n\r\n")) + "\r\n"
    data = (head + "\r\n").encode()
    assert head_bytes is None or len(data) == head_bytes
    return data + body


def statuses(data: bytes) -> list[int]:
    """The status of each answer in ``data``, in order."""
    return [int(m) for m in re.findall(rb"(?:^|\r\n)HTTP/1\.1 (\d{3}) ", data)]


def answer_on(sock: socket.socket) -> int:
    """Read one answer from a kept-alive connection (it stays open); its status."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    response.read()
    assert not response.will_close, response.headers
    return response.status


def assert_refused(raw: object) -> None:
    """uvicorn's 400 for a head over the limit, and the connection closed (raw_exchange read to its end)."""
    assert statuses(raw.data)[-1:] == [400], raw  # type: ignore[attr-defined]
    assert UVICORN_400 in raw.data, raw  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [LIMIT + 1, 3000, 100_000])
def test_a_head_over_the_limit_sent_in_one_write_gets_400(limited, size):
    # h11 measured a head only when a read ended inside it: one whole in a read was never measured
    assert_refused(raw_exchange(limited.port, initialize(size), half_close=False))
    assert_healthy(limited.url)


@pytest.mark.parametrize("piece", [1, 100, LIMIT - 1])
def test_a_head_over_the_limit_sent_in_many_writes_gets_400(limited, piece):
    data = initialize(3000)
    raw = raw_exchange(limited.port, data, half_close=False, piece=piece, pause=0.002 if piece == 1 else 0.01)
    assert_refused(raw)


@pytest.mark.parametrize("size", [LIMIT - 1, LIMIT])
@pytest.mark.parametrize("piece", [0, 7, 100])
def test_a_head_at_or_under_the_limit_is_served(limited, size, piece):
    raw = raw_exchange(limited.port, initialize(size), half_close=False, piece=piece, pause=0.001)
    assert statuses(raw.data) == [200], raw


@pytest.mark.parametrize(("size", "status"), [(DEFAULT_LIMIT, 200), (DEFAULT_LIMIT + 1, 400), (100_000, 400)])
def test_the_default_limit_holds_for_a_head_sent_in_one_write(default, size, status):
    raw = raw_exchange(default.port, initialize(size), half_close=False)
    assert statuses(raw.data) == [status], raw
    assert_healthy(default.url)


def test_an_oversized_head_after_an_answer_on_a_kept_alive_connection_gets_400(limited):
    sock = socket.create_connection(("127.0.0.1", limited.port), timeout=10)
    sock.sendall(initialize(LIMIT, close=False))
    assert answer_on(sock) == 200
    assert_refused(raw_exchange(limited.port, initialize(3000), half_close=False, sock=sock))


def test_an_oversized_head_pipelined_behind_a_request_gets_400(limited):
    # the second head waits in h11's buffer, whole, until the first answer is out
    raw = raw_exchange(limited.port, initialize(LIMIT, close=False) + initialize(3000), half_close=False)
    assert statuses(raw.data) == [200, 400], raw
    assert UVICORN_400 in raw.data, raw


@pytest.mark.parametrize("piece", [0, 4096])
def test_a_large_body_is_not_counted_as_head(limited, piece):
    message = init_message()
    message["params"]["_meta"] = {"pad": "b\r\n\r\n" * 60_000}  # 300 KB, blank lines escaped in JSON
    big = json.dumps(message).encode()
    raw = raw_exchange(limited.port, initialize(LIMIT, body=big, close=False) + initialize(LIMIT),
                       half_close=False, piece=piece)
    assert statuses(raw.data) == [200, 200], raw


def _request_bytes(head_bytes: int) -> bytes:
    head = "GET / HTTP/1.1\r\nHost: x\r\n"
    return (head + "X-Pad: " + "p" * (head_bytes - len(head) - len("X-Pad: \r\n\r\n")) + "\r\n\r\n").encode()


@pytest.mark.parametrize("fast", [True, False])
def test_every_head_is_measured_before_h11_parses_it(monkeypatch, fast):
    # in process, on both ways of reading h11's buffer: the fast one must be the one in use
    h11 = pytest.importorskip("h11")
    from mcpkit.transports import connections

    assert connections._FAST_BUFFER, "h11 changed its receive buffer: heads are measured on a copy"
    monkeypatch.setattr(connections, "_FAST_BUFFER", fast)
    assert len(_request_bytes(100)) == 100

    conn = connections.HeadLimitedConnection(100)
    conn.receive_data(_request_bytes(100) + b"GET")  # at the limit, with the next request begun
    assert isinstance(conn.next_event(), h11.Request)
    assert isinstance(conn.next_event(), h11.EndOfMessage)
    conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
    conn.send(h11.EndOfMessage())
    conn.start_next_cycle()
    assert conn.next_event() is h11.NEED_DATA
    conn.receive_data(_request_bytes(101)[3:])  # the kept-alive request, whole, one byte over
    with pytest.raises(h11.RemoteProtocolError):
        conn.next_event()
    assert conn.their_state is h11.ERROR

    conn = connections.HeadLimitedConnection(100)
    conn.receive_data(_request_bytes(60) + _request_bytes(101))  # pipelined: measured when its turn comes
    assert isinstance(conn.next_event(), h11.Request)
    assert isinstance(conn.next_event(), h11.EndOfMessage)
    assert conn.next_event() is h11.PAUSED
    conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
    conn.send(h11.EndOfMessage())
    conn.start_next_cycle()
    with pytest.raises(h11.RemoteProtocolError):
        conn.next_event()


# ============================================================================ the other limits, every way

TIMEOUT = 1.0  # --header-timeout and --body-timeout of ``timed``
KEEP_ALIVE = 2.0  # its --keep-alive-timeout: longer, to tell which of them closed a connection


@pytest.fixture(scope="module")
def timed() -> Iterator[HttpServer]:
    with serving("--header-timeout", str(TIMEOUT), "--body-timeout", str(TIMEOUT),
                        "--keep-alive-timeout", str(KEEP_ALIVE)) as server:
        yield server


def kept_alive(server: HttpServer) -> socket.socket:
    """A connection that has had one request answered and stays open."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=STEP)
    sock.sendall(initialize(close=False))
    assert answer_on(sock) == 200
    return sock


def trickle(sock: socket.socket, data: bytes, every: float = 0.1) -> Raw:
    """Send ``data`` a byte every ``every`` seconds (far slower than any limit allows) until the
    server closes; what it answered. Fails when it is still open after STEP seconds."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    assert len(data) * every > 2 * STEP  # the whole of it would outlast the wait
    return raw_exchange(0, data, half_close=False, piece=1, pause=every, sock=sock)


def test_a_head_begun_in_one_write_then_stopped_is_closed_after_the_header_timeout(timed):
    raw = raw_exchange(timed.port, initialize(close=False)[:40], half_close=False)
    assert raw.data == b"", raw


@pytest.mark.parametrize("when", ["after an answer", "pipelined behind a request"])
def test_a_kept_alive_connection_trickling_its_next_head_is_closed(timed, when):
    head = initialize(3000, close=False)[:2000]  # well under the head size limit: only time is wrong
    if when == "after an answer":
        sock = kept_alive(timed)
    else:
        sock = socket.create_connection(("127.0.0.1", timed.port), timeout=STEP)
        sock.sendall(initialize(close=False) + head[:10])
        head = head[10:]
    raw = trickle(sock, head)
    assert statuses(raw.data) in ([], [200]), raw


def test_an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout(timed):
    sock = kept_alive(timed)
    started = time.monotonic()
    assert closed_by_server(sock, STEP)
    assert time.monotonic() - started >= KEEP_ALIVE * 0.9
    sock.close()


@pytest.mark.parametrize("when", ["first", "after an answer"])
def test_a_trickled_body_gets_408_and_its_connection_closes(timed, when):
    body = json.dumps(init_message()).encode()
    sock = kept_alive(timed) if when == "after an answer" else socket.create_connection(("127.0.0.1", timed.port))
    whole = initialize(body=body, close=False)
    head = whole[:-len(body)]
    sock.sendall(head + body[:5])  # the head and a little of the body at once, then a byte at a time
    raw = trickle(sock, body[5:] * 10)
    assert statuses(raw.data) == [408], raw


@pytest.mark.parametrize("request_head", [
    # answered before the body is read: 413 by its Content-Length, 404 for another path
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n",
    b"POST /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n",
], ids=["413", "404"])
def test_a_body_still_trickling_after_its_answer_does_not_hold_the_connection(timed, request_head):
    # uvicorn reads and drops the rest of such a body, and every byte of it restarted the
    # keep-alive timer: the connection stayed open as long as the client kept trickling
    sock = socket.create_connection(("127.0.0.1", timed.port), timeout=STEP)
    sock.sendall(request_head + b"{")
    raw = trickle(sock, b"x" * 4999)
    assert statuses(raw.data) in ([413], [404]), raw


def test_a_body_sent_whole_after_its_answer_leaves_the_connection_as_after_any_answer(timed):
    def answered_early() -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", timed.port), timeout=STEP)
        sock.sendall(b"POST /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000\r\n\r\n")
        assert answer_on(sock) == 404
        time.sleep(KEEP_ALIVE / 2)
        sock.sendall(b"x" * 5000)  # the rest, in time
        return sock

    sock = answered_early()
    time.sleep(KEEP_ALIVE * 0.75)  # past the rest's deadline: drained, it no longer applies
    sock.sendall(initialize(close=False))
    assert answer_on(sock) == 200
    sock.close()

    sock = answered_early()  # then idle: the keep-alive timeout closes it, not the header timeout
    started = time.monotonic()
    assert closed_by_server(sock, STEP)
    assert time.monotonic() - started >= KEEP_ALIVE * 0.9
    sock.close()


CAP = 3  # --max-connections of ``capped``


@pytest.fixture(scope="module")
def capped() -> Iterator[HttpServer]:
    with serving("--max-connections", str(CAP)) as server:
        yield server


def test_max_connections_are_served_at_once_and_the_next_gets_503(capped):
    # uvicorn's limit_concurrency counts the asking connection itself: --max-connections 3
    # served two, and --max-connections 1 served none
    time.sleep(0.2)  # the probe connection of HttpServer's start is gone
    held = [kept_alive(capped) for _ in range(CAP)]
    try:
        extra = raw_exchange(capped.port, initialize(), half_close=False)
        assert statuses(extra.data) == [503], extra
        held[0].sendall(initialize(close=False))  # a kept-alive one goes on being served
        assert answer_on(held[0]) == 200
        held.pop().close()
        time.sleep(0.2)
        assert statuses(raw_exchange(capped.port, initialize(), half_close=False).data) == [200]
    finally:
        for sock in held:
            sock.close()
