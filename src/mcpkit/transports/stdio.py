"""stdio transport: newline-delimited JSON-RPC on stdin/stdout (ST-01..ST-08).

stdout carries protocol messages only (ST-02): before serving, the real stdout
is duplicated to a private descriptor for the protocol, and file descriptor 1
is pointed at stderr, so whatever a handler or a library prints (``print``,
C extensions writing to fd 1, logging handlers bound to stdout) lands on
stderr instead of corrupting the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from ..protocol.errors import INVALID_REQUEST, McpError
from ..protocol.jsonrpc import error as error_message
from .. import _json

if TYPE_CHECKING:
    from ..protocol.engine import Outgoing
    from ..server.server import Server
    from ..server.session import ServerSession

__all__ = ["run_stdio", "serve_stdio", "guard_stdout"]

log = logging.getLogger("mcpkit")

#: The default largest line accepted (bytes); larger lines get -32600 and are discarded.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def guard_stdout() -> int:
    """Keep fd 1 for nobody but us: returns a private fd for protocol output (ST-02)."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)  # fd 1 now writes to stderr
    os.set_inheritable(proto_fd, False)
    return proto_fd


class _LineReader(asyncio.Protocol):
    """Splits stdin into lines, feeds them to the session, and applies backpressure."""

    def __init__(self, conn: _StdioConnection) -> None:
        self.conn = conn
        self.buf = bytearray()
        self.discarding = False

    def connection_made(self, transport: Any) -> None:
        self.conn.read_transport = transport

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        buf = self.buf
        buf += data
        limit = conn.max_message_bytes
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            if self.discarding:
                self.discarding = False
            else:
                line = bytes(buf[start:nl])
                if len(line) > limit:
                    conn.too_large(len(line))
                elif line.strip():
                    conn.session.feed(line)
            start = nl + 1
        if start:
            del buf[:start]
        if len(buf) > limit:
            # A line longer than the limit: drop it as it streams in, answer once.
            if not self.discarding:
                conn.too_large(len(buf))
            self.discarding = True
            buf.clear()
        conn.session.flush()
        conn.apply_backpressure()

    def eof_received(self) -> bool:
        if self.buf.strip() and not self.discarding:
            self.conn.session.feed(bytes(self.buf))  # a last line without a newline
        self.buf.clear()
        self.conn.session.flush()
        self.conn.begin_shutdown("end of input")
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self.conn.begin_shutdown("input closed")


class _Writer(asyncio.Protocol):
    def __init__(self, conn: _StdioConnection) -> None:
        self.conn = conn
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        self.conn.write_paused = True
        self.conn.apply_backpressure()

    def resume_writing(self) -> None:
        self.conn.write_paused = False
        self.conn.apply_backpressure()

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self.conn.begin_shutdown("output closed")


class _StdioConnection:
    def __init__(self, server: Server, *, max_message_bytes: int, max_in_flight: int) -> None:
        self.server = server
        self.max_message_bytes = max_message_bytes
        self.max_in_flight = max_in_flight
        self.loop = asyncio.get_running_loop()
        self.read_transport: Any = None
        self.write_transport: Any = None
        self.writer: _Writer | None = None
        self.write_fd: int | None = None  # blocking fallback when stdout is a regular file
        self.read_paused = False
        self.write_paused = False
        self.stopping: asyncio.Event = asyncio.Event()
        self.stop_reason = ""
        from ..server.session import ServerSession

        self.session: ServerSession = ServerSession(server, self.send, self.loop)
        self.session.on_request_done = self.apply_backpressure

    def send(self, messages: list[Outgoing]) -> None:
        data = b"\n".join([m.payload for m in messages]) + b"\n"
        if self.write_transport is not None:
            if not self.write_transport.is_closing():
                self.write_transport.write(data)
        elif self.write_fd is not None:
            view = memoryview(data)
            while view:
                written = os.write(self.write_fd, view)
                view = view[written:]

    def too_large(self, size: int) -> None:
        err = McpError(
            INVALID_REQUEST,
            f"Message too large: {size} bytes exceeds the limit of {self.max_message_bytes} bytes.",
            {"limit": self.max_message_bytes},
        )
        self.send([_Raw(_json.dumps(error_message(None, err.to_error())))])

    def apply_backpressure(self) -> None:
        """Stop reading while too many requests run or the client is not reading our output."""
        rt = self.read_transport
        if rt is None or self.stopping.is_set():
            return
        busy = self.session.in_flight >= self.max_in_flight or self.write_paused
        if busy and not self.read_paused:
            rt.pause_reading()
            self.read_paused = True
        elif not busy and self.read_paused:
            rt.resume_reading()
            self.read_paused = False

    def begin_shutdown(self, reason: str) -> None:
        if not self.stopping.is_set():
            self.stop_reason = reason
            self.stopping.set()


class _Raw:
    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


async def serve_stdio(
    server: Server,
    *,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_in_flight: int = 256,
    drain_timeout: float = 10.0,
) -> None:
    """Serve one client on the given descriptors until EOF or SIGTERM, then finish in-flight work."""
    loop = asyncio.get_running_loop()
    conn = _StdioConnection(server, max_message_bytes=max_message_bytes, max_in_flight=max_in_flight)

    out_file = os.fdopen(stdout_fd, "wb", buffering=0, closefd=False)
    try:
        conn.write_transport, conn.writer = await loop.connect_write_pipe(lambda: _Writer(conn), out_file)
    except ValueError:  # a regular file: write synchronously
        conn.write_fd = stdout_fd

    in_file = os.fdopen(stdin_fd, "rb", buffering=0, closefd=False)
    reader = _LineReader(conn)
    reader_thread = None
    try:
        await loop.connect_read_pipe(lambda: reader, in_file)
    except ValueError:  # a regular file or a terminal that epoll refuses: read in a thread
        reader_thread = threading.Thread(target=_read_blocking, args=(stdin_fd, reader, loop), daemon=True)
        reader_thread.start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, conn.begin_shutdown, f"signal {sig.name}")

    await conn.stopping.wait()
    log.debug("stdio: shutting down (%s)", conn.stop_reason)
    if conn.read_transport is not None:
        with contextlib.suppress(Exception):
            conn.read_transport.pause_reading()
    # ST-07 / LC-09: answer what is in flight, then exit.
    await conn.session.drain(drain_timeout)
    conn.session.close()
    if conn.write_transport is not None and conn.writer is not None:
        conn.write_transport.close()  # flushes the buffer first
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(conn.writer.closed), drain_timeout)
    if conn.read_transport is not None:
        conn.read_transport.close()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(sig)


def _read_blocking(fd: int, reader: _LineReader, loop: asyncio.AbstractEventLoop) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            loop.call_soon_threadsafe(reader.eof_received)
            return
        loop.call_soon_threadsafe(reader.data_received, chunk)


def run_stdio(server: Server, **options: Any) -> None:
    """Serve ``server`` on this process's stdin/stdout; returns when the client is gone."""
    proto_fd = guard_stdout()
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve_stdio(server, stdout_fd=proto_fd, **options))
    except KeyboardInterrupt:
        pass
    finally:
        if server._executor is not None:
            server._executor.shutdown(wait=False, cancel_futures=True)
