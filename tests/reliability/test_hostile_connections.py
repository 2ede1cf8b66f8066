"""Hostile connections to a real ``mcpkit serve --http`` (uvicorn): silent sockets, heads sent a
byte at a time, too many connections. The server closes what does not become a request in time
and stays healthy for everyone else."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.reliability.support import HttpServer, assert_healthy, has_traceback

pytestmark = pytest.mark.reliability

SILENT = 200  # connections that never say anything
STEP = 10.0  # bound on one wait


@pytest.fixture(scope="module")
def served() -> Iterator[HttpServer]:
    server = HttpServer("--header-timeout", "1", "--max-connections", "100")
    try:
        yield server
    finally:
        stderr = server.stop()
        assert not has_traceback(stderr), stderr[-3000:]


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
