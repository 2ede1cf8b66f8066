"""The client's stdio and in-memory transports, and what every transport shares.

A transport moves JSON-RPC messages; the :class:`~mcpkit.client.Client` does everything else.
It is given callbacks when started: ``deliver(message)`` for every decoded JSON-RPC message the
server sent (a dict; batches are split), ``lost(error)`` once the connection is gone for good
(pending requests then fail with that :class:`ClientError`), and ``state(StreamState)`` when
the stream that carries what the server sends outside requests opens, breaks or stops
(client/listening.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
from collections.abc import Callable, Iterable
from typing import Any

from .. import _json
from .environment import child_environment
from .errors import ClientError
from .listening import Backoff, StreamState
from .oversize import Edges

__all__ = ["Transport", "StdioTransport", "MemoryTransport", "is_jsonrpc", "make_transport"]

Deliver = Callable[[dict[str, Any]], None]
Lost = Callable[[ClientError], None]
Report = Callable[[StreamState], None]

#: the longest stdout line the stdio transport reads (bigger ones end the connection)
MAX_LINE = 64 * 1024 * 1024
#: how much of the child's stderr an error message quotes
STDERR_TAIL = 2000


def is_jsonrpc(obj: Any) -> bool:
    """A JSON-RPC 2.0 request, notification or response (shape only: a parse error may lack its id)."""
    return (
        isinstance(obj, dict)
        and obj.get("jsonrpc") == "2.0"
        and ("method" in obj or "result" in obj or "error" in obj)
    )


class Transport:
    """The interface; the defaults suit a transport without a child process."""

    kind = "?"
    #: True where cancelling a request means closing its response stream (2026-07-28 over HTTP)
    closes_to_cancel = False
    stderr: str = ""
    returncode: int | None = None
    #: stdio: the child did not exit when its stdin closed and had to be terminated (ST-07)
    ignored_eof = False
    #: a message from the server larger than this is read past, never held whole, and reported
    #: to ``on_oversize`` (client/oversize.py); None: no limit but the transport's own
    max_message_bytes: int | None = None

    def __init__(self) -> None:
        self.stdout_noise: list[bytes] = []
        self._deliver: Deliver = lambda message: None
        self._lost: Lost = lambda error: None
        self._report: Report = lambda state: None
        #: called with the Edges of a message over max_message_bytes (the Client fails its request)
        self.on_oversize: Callable[[Edges], None] = lambda edges: None

    async def start(self, deliver: Deliver, lost: Lost, state: Report | None = None) -> None:
        self._deliver = deliver
        self._lost = lost
        if state is not None:
            self._report = state

    async def send(self, message: dict[str, Any]) -> None:
        """Send one message. HTTP transports return once the POST's answer has been delivered."""
        await self.send_raw(_json.dumps(message) + b"\n")

    async def send_raw(self, data: bytes) -> None:
        raise NotImplementedError

    def connected(self, version: str, session_meta: dict[str, Any] | None = None) -> None:
        """The handshake (or discovery) is done and ``version`` is in use."""

    async def close(self) -> None:
        raise NotImplementedError

    def deliver_frame(self, frame: bytes) -> bool:
        """Decode ``frame`` and deliver the JSON-RPC messages in it; False when there was none."""
        try:
            obj = _json.loads(frame)
        except _json.JSONDecodeError:
            return False
        items = obj if isinstance(obj, list) and obj else [obj]
        if not all(is_jsonrpc(item) for item in items):
            return False
        for item in items:
            self._deliver(item)
        return True


class StdioTransport(Transport):
    """A child process speaking newline-delimited JSON on stdin/stdout (ST-01..ST-04)."""

    kind = "stdio"

    def __init__(self, argv: list[str], env: dict[str, str | None] | None = None, cwd: str | None = None,
                 inherit_env: bool | Iterable[str] | None = None, sandbox: Any = None) -> None:
        super().__init__()
        if not argv:
            raise ValueError("an empty command line")
        self.argv = list(argv)
        self.env = env
        self.inherit_env = inherit_env
        self.cwd = cwd
        #: a mcpkit.client.sandbox.Sandbox the command runs in, or None
        self.sandbox = sandbox
        self._unsandbox: Any = None  # what removes the sandbox's traces once the process is gone
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr_parts: list[str] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._closing = False
        #: called with each piece of the child's stderr as it arrives (besides keeping it for
        #: :attr:`stderr`): ``mcpkit dev`` shows the server's own output in its terminal
        self.on_stderr: Callable[[str], Any] | None = None

    @property
    def stderr(self) -> str:  # type: ignore[override]
        return "".join(self._stderr_parts)

    @property
    def returncode(self) -> int | None:  # type: ignore[override]
        return self.proc.returncode if self.proc is not None else None

    async def start(self, deliver: Deliver, lost: Lost, state: Report | None = None) -> None:
        await super().start(deliver, lost, state)
        # a server we may not have written sees none of our secrets: an allow-list (environment.py)
        env = child_environment(self.env, self.inherit_env)
        argv = self.argv
        try:
            if self.sandbox is not None:  # never run unconfined instead: a failure here is the error
                argv, self._unsandbox = self.sandbox.wrap(self.argv, self.cwd)
            self.proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, cwd=self.cwd,
                # a line longer than this is read past in pieces (max_message_bytes) or ends the link
                limit=MAX_LINE if self.max_message_bytes is None else self.max_message_bytes,
            )
        except OSError as exc:
            self._cleanup()
            raise ClientError(f"cannot start {argv[0]!r}: {exc}") from exc
        loop = asyncio.get_running_loop()
        self._stderr_task = loop.create_task(self._read_stderr())
        self._tasks = [loop.create_task(self._read_stdout()), self._stderr_task]
        self._report(StreamState("listening", "reading the server's stdout"))

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(65536):
            text = chunk.decode("utf-8", errors="replace")
            self._stderr_parts.append(text)
            if self.on_stderr is not None:
                self.on_stderr(text)

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        stdout = self.proc.stdout
        reason = "closed its stdout"
        try:
            while True:
                try:
                    line = await stdout.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:  # the end, after a last line without \n
                    line = exc.partial
                except asyncio.LimitOverrunError:  # a line beyond the reader's limit (start())
                    if self.max_message_bytes is None:
                        reason = f"wrote a line longer than {MAX_LINE} bytes"
                        break
                    if not await self._read_past(stdout):
                        break
                    continue
                if not line:
                    break
                frame = line.rstrip(b"\r\n")
                if not self.deliver_frame(frame):
                    self.stdout_noise.append(frame)
        finally:
            await self._ended(reason)

    async def _read_past(self, stdout: asyncio.StreamReader) -> bool:
        """Read the rest of a line over max_message_bytes in pieces of at most the reader's
        limit, keeping only its ends, and report it; False when the stdout ended meanwhile."""
        edges = Edges()
        while True:
            try:
                edges.add(await stdout.readuntil(b"\n"))
                break
            except asyncio.LimitOverrunError as exc:
                edges.add(await stdout.read(exc.consumed))  # the part in the buffer: bounded by the limit
            except asyncio.IncompleteReadError as exc:
                edges.add(exc.partial)
                self.on_oversize(edges)
                return False
        self.on_oversize(edges)
        return True

    async def _ended(self, reason: str) -> None:
        if self._closing:
            return
        self._lost(ClientError(await self._gone(f"the server {reason}")))

    async def _gone(self, otherwise: str) -> str:
        """Why the server stopped talking: its exit code and the end of its stderr, once it
        has exited (waited for briefly), else ``otherwise``."""
        proc = self.proc
        assert proc is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), 2.0)  # EOF on stdout usually means it exited
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        what = f"the server exited with code {proc.returncode}" if proc.returncode is not None else otherwise
        if proc.returncode is not None:
            self._cleanup()
            how = self.sandbox.describe_exit(proc.returncode) if self.sandbox is not None else None
            what += f" ({how})" if how else ""
        tail = self.stderr[-STDERR_TAIL:].strip()
        return what + (f"; stderr: {tail}" if tail else "; no stderr output")

    async def send_raw(self, data: bytes) -> None:
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            if proc is None or self._closing:
                raise ClientError("the server's stdin is closed")
            # a server that exited at once (before the handshake): say how it ended
            raise ClientError(await self._gone("the server's stdin is closed"))
        try:
            proc.stdin.write(data)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            if self._closing:
                raise ClientError(f"cannot write to the server: {exc}") from exc
            raise ClientError(await self._gone(f"cannot write to the server: {exc}")) from exc

    async def close(self) -> None:
        """Close stdin, give the child 5 s to exit, then SIGTERM, then SIGKILL."""
        proc = self.proc
        if proc is None:
            return
        self._closing = True
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await proc.stdin.wait_closed()
        for step in (None, proc.terminate, proc.kill):
            if step is not None and proc.returncode is None:
                #: the child outlived the EOF grace period (ST-07): callers may say so
                self.ignored_eof = True
                with contextlib.suppress(ProcessLookupError):
                    step()
            try:
                await asyncio.wait_for(proc.wait(), 5.0)
                break
            except asyncio.TimeoutError:
                continue
        # let the readers drain what the child wrote before it exited
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), 2.0)
        for task in self._tasks:
            task.cancel()
        self._cleanup()

    def _cleanup(self) -> None:
        if self._unsandbox is not None:
            self._unsandbox, undo = None, self._unsandbox
            undo()


class MemoryTransport(Transport):
    """An mcpkit :class:`~mcpkit.server.server.Server` driven in-process through a
    :class:`~mcpkit.server.session.ServerSession` on the running loop; every message goes
    through JSON encoding both ways, as on a real wire."""

    kind = "memory"

    def __init__(self, server: Any) -> None:
        super().__init__()
        self.server = server
        self.session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lifespan: Any = None  # the server's lifespan, while this connection holds it

    async def start(self, deliver: Deliver, lost: Lost, state: Report | None = None) -> None:
        await super().start(deliver, lost, state)
        from ..server.session import ServerSession

        self.server.check_environment()  # served in-process as on a wire: the environment is checked alike
        self._loop = asyncio.get_running_loop()
        lifespan = self.server.lifespan
        if lifespan is not None:
            # set up before the first request, as every transport does (server/lifespan.py)
            await lifespan.enter(self.server)
            self._lifespan = lifespan
        self.session = ServerSession(self.server, self._from_server, self._loop, inline_sync=False)
        self._report(StreamState("listening", "in memory"))

    def _from_server(self, batch: list[Any]) -> None:
        # called under the session lock, from the loop or a worker thread, in wire order;
        # call_soon_threadsafe keeps that order
        assert self._loop is not None
        frames = [out.payload for out in batch]
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens any more
            self._loop.call_soon_threadsafe(self._deliver_frames, frames)

    def _deliver_frames(self, frames: list[bytes]) -> None:
        for frame in frames:
            if not self.deliver_frame(frame):
                self.stdout_noise.append(bytes(frame))

    async def send_raw(self, data: bytes) -> None:
        if self.session is None or self.session.closed:
            raise ClientError("the in-memory session is closed")
        for line in data.split(b"\n"):
            if line.strip():
                self.session.feed(line)
        self.session.flush()

    async def close(self) -> None:
        if self.session is not None and not self.session.closed:
            self.session.close()
            await asyncio.sleep(0)
        lifespan, self._lifespan = self._lifespan, None
        if lifespan is not None:
            await lifespan.exit()


def make_transport(
    target: Any, transport: str, *, headers: dict[str, str] | None, env: dict[str, str | None] | None,
    cwd: str | None, timeout: float | None, reconnect: Backoff | None = None,
    inherit_env: bool | Iterable[str] | None = None, sandbox: Any = None,
) -> Transport:
    """The transport ``Client(target, transport=...)`` uses: "auto" picks http for an http(s) URL,
    stdio for a command (a list, or a string split like a shell would), memory for a Server.
    ``reconnect`` paces the reconnection of Streamable HTTP's GET stream."""
    kind = transport
    if kind == "auto":
        if isinstance(target, str) and target.startswith(("http://", "https://")):
            kind = "http"
        elif isinstance(target, (str, list, tuple)):
            kind = "stdio"
        else:
            kind = "memory"
    if kind == "stdio":
        argv = shlex.split(target) if isinstance(target, str) else [str(a) for a in target]
        if isinstance(target, str) and len(argv) == 1 and argv[0].endswith(".py"):
            argv = [sys.executable, argv[0]]  # "server.py": run it with this interpreter
        return StdioTransport(argv, env=env, cwd=cwd, inherit_env=inherit_env, sandbox=sandbox)
    if sandbox is not None:
        raise ValueError("a sandbox confines a command the client starts, not a URL or a Server")
    if kind == "memory":
        return MemoryTransport(target)
    if kind in ("http", "sse"):
        if not isinstance(target, str):
            raise ValueError(f"transport {kind!r} needs a URL")
        from .http import SseTransport, StreamableHttpTransport

        if kind == "sse":
            return SseTransport(target, headers=headers, timeout=timeout)
        return StreamableHttpTransport(target, headers=headers, timeout=timeout, reconnect=reconnect)
    raise ValueError(f"unknown transport {transport!r}: auto, stdio, http, sse or memory")
