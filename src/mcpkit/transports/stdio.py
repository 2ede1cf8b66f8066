"""stdio transport: newline-delimited JSON-RPC on stdin/stdout (ST-01..ST-08).

stdout carries protocol messages only (ST-02): before serving, the real stdout
is duplicated to a private descriptor for the protocol, and file descriptor 1
is pointed at stderr, so whatever a handler or a library prints (``print``,
C extensions writing to fd 1, logging handlers bound to stdout) lands on
stderr instead of corrupting the stream.

Threads, and why. A reader thread reads stdin and feeds lines to the session;
sync handlers run inline on it, which makes a call cost about what a bare
read-handle-write loop costs (no thread hop per call). So that a slow sync
handler never delays ``ping`` or other calls, a watchdog hands the reading to
a fresh thread once the current reader has been busy for ``handoff_after``
seconds (and at once when a handler blocks waiting for the client); the old
thread finishes its call, writes its answer and ends. Async handlers run on an
event loop in its own thread. Writes are blocking and happen under the
session's lock, so messages leave in the order the engine queued them.

At most ``max_readers`` threads run handlers at once, and one more always reads:
when every handler thread is blocked (eight slow sync calls), the reader keeps
reading, answers ``ping`` and applies cancellations and client responses at once
(none needs a worker), and sets requests that would run a handler aside; the next
handler thread to finish takes them, oldest first. A request cancelled while set
aside is dropped unanswered, as a cancellation allows (CN-01).
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from .. import _json
from ..protocol.errors import INVALID_REQUEST, McpError
from . import SHUTDOWN_TIMEOUT

if TYPE_CHECKING:
    from ..protocol.engine import Outgoing
    from ..server.server import Server
    from ..server.session import ServerSession

__all__ = ["run_stdio", "StdioServer", "guard_stdout", "DEFAULT_MAX_MESSAGE_BYTES"]

log = logging.getLogger("mcpkit")

#: The default largest line accepted (bytes); a larger line gets -32600 and is discarded.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_READ_SIZE = 1 << 16  # below malloc's mmap threshold: a larger read buffer costs page faults per read


def guard_stdout() -> int:
    """Keep fd 1 for nobody but us: returns a private fd for protocol output (ST-02)."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)  # fd 1 now writes to stderr
    os.set_inheritable(proto_fd, False)
    return proto_fd


class StdioServer:
    """Serves one client over a pair of file descriptors until EOF or a signal."""

    def __init__(
        self,
        server: Server,
        *,
        in_fd: int = 0,
        out_fd: int = 1,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_in_flight: int = 256,
        drain_timeout: float = SHUTDOWN_TIMEOUT,
        handoff_after: float = 0.02,
        auth: Any = None,
    ) -> None:
        self.server = server
        #: AU-01: the credential of a stdio server comes from its environment; an ApiKeyAuth
        #: (``stdio_access``) reads it once at start. None: the server's own ``auth``
        self.auth = server.auth if auth is None else auth
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.max_message_bytes = max_message_bytes
        self.max_in_flight = max_in_flight
        self.drain_timeout = drain_timeout
        self.handoff_after = handoff_after
        #: the most threads running handlers at once; one more thread may read (see _hand_off)
        self.max_readers = 8
        self._readers = 0
        #: lines being dispatched right now: a request is not in the session's books until its
        #: handler has been called, and EOF must not end the process in between (ST-07)
        self._feeding = 0
        self.loop: Any = None  # started on first use: sync-only servers never import asyncio
        self._loop_thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()
        self.session: ServerSession | None = None
        self._stop = threading.Event()
        self.stop_reason = ""
        # reader state, guarded by _rlock
        self._rlock = threading.Lock()
        self._gen = 0  # the thread whose generation equals _gen is the reader
        self._busy_since: float | None = None
        self._lines: collections.deque[bytes] = collections.deque()
        #: requests read while every handler thread was busy: (line, request id or None)
        self._deferred: collections.deque[tuple[bytes, Any]] = collections.deque()
        self._input_ended = False
        self._partial = bytearray()
        self._discarding = False
        self._local = threading.local()
        self._capacity = threading.Condition()
        self._capacity_waiters = 0
        self._broken = False
        #: requests whose notifications went out and whose response has not (see _write_yielding)
        self._notified: set[Any] | None = None

    # ------------------------------------------------------------------ plumbing

    def _get_loop(self) -> Any:
        """The event loop for async handlers, in its own thread, started once on demand."""
        with self._loop_lock:
            if self.loop is None:
                import asyncio

                loop = asyncio.new_event_loop()
                started = threading.Event()
                loop.call_soon(started.set)
                self._loop_thread = threading.Thread(target=loop.run_forever, name="mcpkit-loop", daemon=True)
                self._loop_thread.start()
                started.wait()  # the loop runs in its thread now: on_loop_thread answers right from here on
                self.loop = loop
            return self.loop

    def _write(self, messages: list[Outgoing]) -> None:
        """Called under the session lock: write the messages, in order, as lines."""
        if self._broken:
            return
        if self._notified is None and (messages[0].answers if len(messages) == 1 else all(m.answers for m in messages)):
            # the common case: only responses, after no notification of theirs
            self._write_bytes(_encoded(messages))
            return
        self._write_yielding(messages)

    def _write_yielding(self, messages: list[Outgoing]) -> None:
        """Let the client read a request's notifications before its response (docs/interop.md).

        The TypeScript SDK client (1.x) handles a notification one microtask after the read that
        brought it, but a response at once: a request's last progress read together with its
        response is dropped ("unknown token"). So a response that follows notifications of its
        own request is written after yielding the CPU, which lets a client waiting on the pipe
        read what is already there first. Only such responses pay for it (one sched_yield)."""
        notified = self._notified if self._notified is not None else set()
        start = 0
        for index, message in enumerate(messages):
            if not message.answers:
                if message.related is not None:
                    notified.add(message.related)
            elif notified and not notified.isdisjoint(message.answers):
                if index > start:
                    self._write_bytes(_encoded(messages[start:index]))
                    start = index
                os.sched_yield()
                notified.difference_update(message.answers)
        # requests that never answer (cancelled) must not make this grow without bound
        self._notified = notified if notified and len(notified) < 4096 else None
        self._write_bytes(_encoded(messages[start:]))

    def _write_bytes(self, data: bytes) -> None:
        if self._broken:
            return
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.out_fd, view)
                view = view[written:]
        except OSError as exc:  # EPIPE: the client is gone
            self._broken = True
            self.stop(f"output closed ({exc.strerror})")

    def stop(self, reason: str) -> None:
        if not self._stop.is_set():
            self.stop_reason = reason
            self._stop.set()

    # ------------------------------------------------------------------ serving

    def serve(self) -> None:
        """Run until the client is gone; must be called from the main thread for signal handling."""
        from ..server.session import ServerSession

        self.server.check_environment()  # a bad MCPKIT_* value, or one nothing reads, stops it here
        read_credential = getattr(self.auth, "stdio_access", None)
        # before the session exists: a missing or refused key stops the server with one line
        access = read_credential() if read_credential is not None else None
        session = ServerSession(self.server, self._write, inline_sync=True, loop_factory=self._get_loop)
        if access is not None:
            # the one user who launched the process: every call is theirs, as an HTTP request
            # authenticated with the same key would be (principal, ctx.access_token, audit)
            session.principal = access.subject
            session.access_token = access
        session.before_block = self._before_block
        session.task_binding = os.urandom(16).hex()  # TX-07: this connection's tasks are its own
        session.on_request_done = self._request_done
        self.session = session
        lifespan = self.server.lifespan
        if lifespan is not None:
            # set up on the loop async handlers run on, before the first line is read
            # (server/lifespan.py); a setup that fails stops the server before it serves
            import asyncio

            asyncio.run_coroutine_threadsafe(lifespan.enter(self.server), self._get_loop()).result()
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, frame: self.stop(f"signal {signum}"))
        try:
            self._start_reader()
            threading.Thread(target=self._watchdog, name="mcpkit-watchdog", daemon=True).start()
            while not self._stop.wait(0.5):
                pass
            log.debug("stdio: shutting down (%s)", self.stop_reason)
            # nothing more can come from the client: handlers waiting for its answers stop waiting
            session.abandon_client_requests(f"the client closed the connection ({self.stop_reason})")
            session.end_listens()
            # ST-07 / LC-09: finish and answer what is in flight, then exit: first the lines still
            # being dispatched (a slow first call can outlive the hand-off to the reader that saw EOF)
            deadline = time.monotonic() + self.drain_timeout
            while self._feeding and time.monotonic() < deadline:
                time.sleep(0.005)
            if not session.wait_idle(max(0.0, deadline - time.monotonic())):
                log.warning("stdio: requests still running after %.1f s; exiting anyway", self.drain_timeout)
                session.cancel_all()
            session.flush()
            session.close()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if lifespan is not None:
                self._leave(lifespan)
            if self.loop is not None and self._loop_thread is not None:
                self._settle_tasks()
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._loop_thread.join(timeout=2)

    def _leave(self, lifespan: Any) -> None:
        """The lifespan's teardown, once the requests in flight are answered, on its loop."""
        import asyncio

        try:
            asyncio.run_coroutine_threadsafe(lifespan.exit(), self._get_loop()).result()
        except Exception:  # noqa: BLE001 - the server stops anyway; the teardown's failure is told
            log.exception("the lifespan's teardown failed")

    def _settle_tasks(self, timeout: float = 2.0) -> None:
        """Before the loop stops: let cancelled handlers see their CancelledError and run their
        cleanup (a cancellation only takes effect on the task's next step of the loop)."""
        import asyncio

        async def settle() -> None:
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if pending:
                await asyncio.wait(pending, timeout=timeout)

        try:
            asyncio.run_coroutine_threadsafe(settle(), self.loop).result(timeout + 1.0)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - exiting anyway
            log.debug("stdio: tasks still running at exit", exc_info=True)

    def _start_reader(self) -> None:
        gen = self._gen
        self._readers += 1
        threading.Thread(target=self._reader, args=(gen,), name=f"mcpkit-reader-{gen}", daemon=True).start()

    def _hand_off(self, gen: int) -> None:
        """Make a fresh thread the reader if ``gen`` still is (called with _rlock held); at most
        ``max_readers`` threads run handlers, plus the one reading: more would only block too
        (e.g. on a stdout the client does not read)."""
        if self._gen == gen and not self._stop.is_set() and self._readers <= self.max_readers:
            self._gen = gen + 1
            self._busy_since = None
            self._start_reader()

    def _before_block(self) -> None:
        gen = getattr(self._local, "gen", None)
        if gen is not None:
            with self._rlock:
                self._hand_off(gen)

    def _watchdog(self) -> None:
        interval = self.handoff_after
        while not self._stop.wait(interval):
            with self._rlock:
                since = self._busy_since
                if since is not None and time.monotonic() - since >= interval:
                    log.debug("stdio: a handler has run for %.0f ms; reading moves to a new thread", interval * 1000)
                    self._hand_off(self._gen)

    def _request_done(self) -> None:
        if self._capacity_waiters:  # only a reader stopped by backpressure needs waking
            with self._capacity:
                self._capacity.notify_all()

    def _all_busy(self) -> bool:
        """With _rlock held: every handler slot is taken by a thread other than the reader."""
        return self._readers > self.max_readers

    def _next_line(self, gen: int) -> tuple[bytes | None, bool]:
        """With _rlock held: (the line this thread handles next, whether it should go on)."""
        deferred = self._deferred
        if self._gen != gen:
            # handed off: a handler slot is free now (this thread's); a set-aside request takes it
            if deferred:
                self._feeding += 1
                return deferred.popleft()[0], True
            self._readers -= 1  # with the check above, under one lock: nothing is left behind
            return None, False
        if deferred and (not self._all_busy() or self._input_ended):
            line = deferred.popleft()[0]
        else:
            line = None
            lines = self._lines
            while lines:
                line = lines.popleft()
                if not self._all_busy() or not self._set_aside(line):
                    break
                line = None
        if line is not None:
            self._busy_since = time.monotonic()
            self._feeding += 1  # until dispatched: EOF must not end the process in between (ST-07)
        else:
            self._busy_since = None
        return line, True

    def _set_aside(self, line: bytes) -> bool:
        """With _rlock held, every handler slot busy: keep ``line`` for later when it would run a
        handler (True); ping, cancellations, responses and notifications are fed at once."""
        try:
            message = _json.loads(line)
        except (ValueError, TypeError):
            return False  # unreadable: the engine answers it at once
        batch = message if type(message) is list else [message]
        for item in batch:
            if type(item) is not dict:
                continue
            method = item.get("method")
            if method == "notifications/cancelled" and type(message) is not list:
                params = item.get("params")
                rid = params.get("requestId") if type(params) is dict else None
                for entry in self._deferred:
                    if rid is not None and entry[1] == rid:
                        self._deferred.remove(entry)  # CN-01: never started, so never answered
                        return True
            elif "id" in item and isinstance(method, str) and method != "ping":
                self._deferred.append((line, item["id"] if type(message) is not list else None))
                return True
        return False

    def _reader(self, gen: int) -> None:
        self._local.gen = gen
        session = self.session
        assert session is not None
        going = True
        fed = False  # a line was dispatched and not yet counted out of _feeding
        try:
            while True:
                with self._rlock:
                    if fed:  # counted out under the lock taken anyway for the next line
                        self._feeding -= 1
                        fed = False
                    line, going = self._next_line(gen)
                if not going:
                    break
                if line is not None:
                    fed = True
                    try:
                        session.feed(line)
                    except Exception:  # noqa: BLE001 - one bad line must never end the server
                        self._internal_error()
                    outbox = session.engine.outbox
                    if outbox and (len(outbox) >= 256 or len(outbox[-1].payload) >= 65536):
                        # big or many answers go out now rather than after the whole read: memory
                        # stays bounded, and a client that stops reading stops the reading here
                        session.flush()
                    continue
                session.flush()
                if self._stop.is_set():
                    break
                if session.in_flight + len(self._deferred) >= self.max_in_flight:
                    with self._capacity:  # backpressure: stop reading while too much runs
                        self._capacity_waiters += 1
                        try:
                            self._capacity.wait_for(
                                lambda: session.in_flight + len(self._deferred) < self.max_in_flight
                                or self._stop.is_set(), 0.2
                            )
                        finally:
                            self._capacity_waiters -= 1
                    continue
                try:
                    chunk = os.read(self.in_fd, _READ_SIZE)
                except OSError as exc:
                    chunk = b""
                    log.debug("stdio: read failed: %s", exc)
                if not chunk:
                    with self._rlock:
                        if self._partial and not self._discarding:
                            self._lines.append(bytes(self._partial))  # a last line without a newline
                        self._partial.clear()
                        self._input_ended = True  # set-aside requests may now run on this thread
                        pending = bool(self._lines) or bool(self._deferred)
                    if pending:
                        continue
                    self.stop("end of input")
                    break
                self._split(chunk)
        except Exception:  # noqa: BLE001 - never die silently: stop and let the main thread report
            log.exception("stdio: reader failed")
            self.stop("reader failed")
        finally:
            if going or fed:  # ended otherwise than by _next_line, which counted it out itself
                with self._rlock:
                    if fed:
                        self._feeding -= 1
                    if going:
                        self._readers -= 1
            session.flush()

    def _split(self, chunk: bytes) -> None:
        limit = self.max_message_bytes
        with self._rlock:
            buf = self._partial
            start = 0
            # the held part has no newline: look only at what arrived, or a line of many chunks
            # is searched again from its start on every read
            scan = len(buf)
            buf += chunk
            lines = self._lines
            while True:
                nl = buf.find(b"\n", scan)
                scan = nl + 1
                if nl < 0:
                    break
                if self._discarding:
                    self._discarding = False
                elif nl - start > limit:
                    self._too_large(nl - start)
                elif nl > start:
                    line = bytes(buf[start:nl])
                    if not line.isspace():
                        lines.append(line)
                start = nl + 1
            if start:
                del buf[:start]
            if len(buf) > limit:
                # a line longer than the limit: drop it as it streams in, answer once
                if not self._discarding:
                    self._too_large(len(buf))
                self._discarding = True
                buf.clear()

    def _internal_error(self) -> None:
        from ..server.session import new_correlation_id

        cid = new_correlation_id()
        log.exception("stdio: a message could not be processed (correlation id %s)", cid)
        session = self.session
        assert session is not None
        with session._lock:
            session.engine.reject(McpError(-32603, "Internal error.", {"correlationId": cid}))

    def _too_large(self, size: int) -> None:
        session = self.session
        assert session is not None
        with session._lock:
            session.engine.reject(
                McpError(
                    INVALID_REQUEST,
                    f"Message too large: {size} bytes exceeds the limit of {self.max_message_bytes} bytes.",
                    {"limit": self.max_message_bytes},
                )
            )


def run_stdio(server: Server, *, out_fd: int | None = None, **options: Any) -> None:
    """Serve ``server`` on this process's stdin/stdout; returns when the client is gone.

    ``out_fd`` is a descriptor from :func:`guard_stdout` taken earlier (the CLI guards stdout
    before it imports the user's module, so output at import time is kept off the wire too).
    """
    proto_fd = guard_stdout() if out_fd is None else out_fd
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        StdioServer(server, in_fd=0, out_fd=proto_fd, **options).serve()
    finally:
        if server._executor is not None:
            server._executor.shutdown()


def _encoded(messages: list[Outgoing]) -> bytes:
    # one copy of the payloads, not two (a join, then a concatenation for the last newline)
    return b"\n".join([*[m.payload for m in messages], b""])
