"""Streamable HTTP and legacy HTTP+SSE (``server.http_app``), driven byte for byte.

Two drivers speak to the app through one interface (:class:`Reply`): :class:`AsgiDriver` calls
the ASGI app in-process (scopes built here, ``receive()`` fed from a queue, ``send()``
collected, a disconnect is an ``http.disconnect`` message), and :class:`TcpDriver` speaks
HTTP/1.1 over a socket to a real ``mcpkit serve --http`` (uvicorn) where a real connection
drop matters. Every JSON-RPC message a test receives goes through ``wire.record`` so the
official schema of the negotiated revision checks HTTP traffic as it checks stdio traffic.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio

from tests.conftest import mcpkit_command

LATEST = "2025-11-25"
#: what the wire checker uses for messages sent before a revision was negotiated
PRE_NEGOTIATION = "2025-11-25"
BOTH = "application/json, text/event-stream"
#: the Host an in-process request carries (a real server gets 127.0.0.1:<its port>)
ASGI_HOST = "127.0.0.1:8000"
STEP = 10.0  # bound on any single wait: generous, never a performance assertion


# ============================================================================ SSE parsing


@dataclass
class Event:
    """One SSE event, as the WHATWG parsing rules read it (``data`` None: no data field)."""

    id: str | None = None
    event: str | None = None
    data: str | None = None
    retry: int | None = None

    def json(self) -> Any:
        assert self.data, f"event without data: {self}"
        return json.loads(self.data)


class SseParser:
    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Event]:
        self._buffer += chunk.replace(b"\r\n", b"\n")
        events = []
        while b"\n\n" in self._buffer:
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            event = Event()
            seen = False
            for line in block.decode("utf-8").split("\n"):
                if not line or line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                seen = True
                if name == "id":
                    event.id = value
                elif name == "event":
                    event.event = value
                elif name == "data":
                    event.data = value if event.data is None else event.data + "\n" + value
                elif name == "retry" and value.isdigit():
                    event.retry = int(value)
            if seen:
                events.append(event)
        return events

    @property
    def rest(self) -> bytes:
        return self._buffer


# ============================================================================ replies


class Reply:
    """A response being received: status and headers at once, the body as it streams."""

    status: int
    headers: dict[str, str]

    def __init__(self) -> None:
        self._sse = SseParser()
        self._pending: list[Event] = []
        self._ended = False
        self.body = b""  # everything received so far

    async def _chunk(self) -> bytes | None:  # pragma: no cover - implemented by drivers
        raise NotImplementedError

    async def disconnect(self) -> None:  # pragma: no cover - implemented by drivers
        raise NotImplementedError

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    async def read(self) -> bytes:
        """The whole body (waits for its end)."""
        while not self._ended:
            chunk = await asyncio.wait_for(self._chunk(), STEP)
            if chunk is None:
                self._ended = True
            else:
                self.body += chunk
        return self.body

    async def json(self) -> Any:
        return json.loads(await self.read())

    async def next_event(self, timeout: float = STEP) -> Event | None:
        """The next SSE event; None once the stream ended."""
        while not self._pending:
            if self._ended:
                return None
            chunk = await asyncio.wait_for(self._chunk(), timeout)
            if chunk is None:
                self._ended = True
            else:
                self.body += chunk
                self._pending.extend(self._sse.feed(chunk))
        return self._pending.pop(0)

    async def events(self) -> list[Event]:
        """Every remaining SSE event, until the stream ends."""
        out = []
        while (event := await self.next_event()) is not None:
            out.append(event)
        return out

    @property
    def ended(self) -> bool:
        return self._ended


class _AsgiReply(Reply):
    def __init__(self, app: Any, scope: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        super().__init__()
        self._in: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for m in messages:
            self._in.put_nowait(m)
        self._out: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = asyncio.get_running_loop().create_future()
        self.task = asyncio.ensure_future(self._run(app, scope))

    async def _run(self, app: Any, scope: dict[str, Any]) -> None:
        try:
            await app(scope, self._receive, self._send)
        except BaseException as exc:
            if not self._started.done():
                self._started.set_exception(exc)
            raise
        finally:
            if not self._started.done():
                self._started.set_exception(AssertionError("the app returned without a response"))
            self._out.put_nowait(None)

    async def _receive(self) -> dict[str, Any]:
        return await self._in.get()

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert not self._started.done(), "response started twice"
            self._started.set_result((message["status"], message.get("headers", [])))
        elif message["type"] == "http.response.body":
            assert self._started.done(), "body before the response started"
            if message.get("body"):
                self._out.put_nowait(message["body"])
            if not message.get("more_body", False):
                self._out.put_nowait(None)

    async def start(self) -> _AsgiReply:
        status, headers = await asyncio.wait_for(asyncio.shield(self._started), STEP)
        self.status = status
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
        self.raw_headers = headers
        return self

    async def _chunk(self) -> bytes | None:
        return await self._out.get()

    async def disconnect(self) -> None:
        """The client goes away: ``http.disconnect``, then the app must finish by itself."""
        self._in.put_nowait({"type": "http.disconnect"})
        await asyncio.wait_for(asyncio.shield(self.task), STEP)
        self._ended = True


class AsgiDriver:
    """Calls the ASGI app in-process."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.host = ASGI_HOST
        self.client = ("127.0.0.1", 50000)  # the scope's client: the address the server sees
        self.replies: list[_AsgiReply] = []

    async def aclose(self) -> None:
        """End every exchange still running (as if each client went away)."""
        for reply in self.replies:
            if not reply.task.done():
                await reply.disconnect()

    async def open(
        self,
        method: str,
        target: str,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        chunks: list[bytes] | None = None,
    ) -> Reply:
        """``chunks``: the body in several ``http.request`` messages and no Content-Length."""
        parts = urlsplit(target)
        hdrs = {"host": self.host}
        if chunks is None:
            hdrs["content-length"] = str(len(body))
        hdrs.update({k.lower(): v for k, v in (headers or {}).items() if v is not None})
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": parts.path,
            "raw_path": parts.path.encode(),
            "query_string": parts.query.encode(),
            "root_path": "",
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in hdrs.items()],
            "client": self.client,
            "server": ("127.0.0.1", 8000),
        }
        pieces = chunks if chunks is not None else [body]
        messages = [
            {"type": "http.request", "body": piece, "more_body": i < len(pieces) - 1} for i, piece in enumerate(pieces)
        ]
        reply = _AsgiReply(self.app, scope, messages)
        self.replies.append(reply)
        return await reply.start()


class _TcpReply(Reply):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self._reader = reader
        self._writer = writer
        self._chunked = False
        self._remaining: int | None = None

    async def start(self) -> _TcpReply:
        head = await asyncio.wait_for(self._reader.readuntil(b"\r\n\r\n"), STEP)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                self.headers[name.strip().lower()] = value.strip()
        self._chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        if "content-length" in self.headers:
            self._remaining = int(self.headers["content-length"])
        return self

    async def _chunk(self) -> bytes | None:
        if self._chunked:
            size_line = await self._reader.readline()
            if not size_line:
                return None
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await self._reader.readline()
                self.close()
                return None
            data = await self._reader.readexactly(size)
            await self._reader.readexactly(2)
            return data
        if self._remaining is not None:
            if self._remaining == 0:
                self.close()
                return None
            data = await self._reader.read(self._remaining)
            if not data:
                return None
            self._remaining -= len(data)
            return data
        data = await self._reader.read(65536)
        return data or None

    def close(self) -> None:
        transport = self._writer.transport
        if not transport.is_closing():
            transport.abort()

    async def disconnect(self) -> None:
        """Drop the TCP connection (no orderly end of the request)."""
        self.close()
        self._ended = True


class TcpDriver:
    """HTTP/1.1 over a socket to a real server (one connection per request), from the
    loopback address ``source`` when given (127.0.0.2, 127.0.0.3...: distinct clients)."""

    def __init__(self, port: int, source: str | None = None) -> None:
        self.port = port
        self.source = source
        self.host = f"127.0.0.1:{port}"
        self.replies: list[_TcpReply] = []

    async def aclose(self) -> None:
        for reply in self.replies:
            reply.close()

    async def open(
        self,
        method: str,
        target: str,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        chunks: list[bytes] | None = None,
    ) -> Reply:
        local = (self.source, 0) if self.source else None
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port, local_addr=local),
                                                STEP)
        hdrs = {"host": self.host, "connection": "close"}
        if chunks is None:
            hdrs["content-length"] = str(len(body))
        else:
            hdrs["transfer-encoding"] = "chunked"
        hdrs.update({k.lower(): v for k, v in (headers or {}).items() if v is not None})
        head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        writer.write(head.encode("latin-1"))
        if chunks is None:
            writer.write(body)
        else:
            for piece in chunks:
                if piece:
                    writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        reply = _TcpReply(reader, writer)
        self.replies.append(reply)
        return await reply.start()


# ============================================================================ an MCP client over either driver


def jsonrpc(method: str, params: dict[str, Any] | None = None, id: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        msg["id"] = id
    if params is not None:
        msg["params"] = params
    return msg


def init_params(revision: str = LATEST, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "protocolVersion": revision,
        "capabilities": capabilities if capabilities is not None else {"sampling": {}, "elicitation": {}},
        "clientInfo": {"name": "mcpkit-http-tests", "version": "1.0.0"},
    }


class McpHttp:
    """One MCP session over Streamable HTTP (or none: stateless), recording what it receives.

    ``post`` returns the raw :class:`Reply`; ``messages(reply)`` reads it to the end (an SSE
    stream or a JSON body) and returns the JSON-RPC messages, each validated by ``wire``.
    """

    def __init__(self, driver: Any, wire: Any, *, path: str = "/mcp", revision: str = LATEST) -> None:
        self.driver = driver
        self.wire = wire
        self.path = path
        self.offered = revision
        self.revision: str | None = None
        self.session_id: str | None = None
        self.capabilities: dict[str, Any] = {}  # the server's, from initialize
        self._next_id = 0
        self._methods: dict[Any, str] = {}  # request id -> method, for the schema check of answers

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def headers(self, **extra: str | None) -> dict[str, str]:
        out: dict[str, str] = {"content-type": "application/json", "accept": BOTH}
        if self.session_id is not None:
            out["mcp-session-id"] = self.session_id
        if self.revision is not None and self.revision >= "2025-06-18":
            out["mcp-protocol-version"] = self.revision
        for key, value in extra.items():
            name = key.replace("_", "-")
            if value is None:
                out.pop(name, None)
            else:
                out[name] = value
        return out

    # -------------------------------------------------------------- sending

    async def post(self, message: Any, *, body: bytes | None = None, **headers: str | None) -> Reply:
        for m in message if isinstance(message, list) else [message]:
            if isinstance(m, dict) and "method" in m and "id" in m:
                self._methods[m["id"]] = m["method"]
        raw = body if body is not None else json.dumps(message).encode()
        return await self.driver.open("POST", self.path, self.headers(**headers), raw)

    async def get(self, **headers: str | None) -> Reply:
        hdrs = self.headers(**{"accept": "text/event-stream", **headers})
        hdrs.pop("content-type", None)
        return await self.driver.open("GET", self.path, hdrs)

    async def delete(self, **headers: str | None) -> Reply:
        hdrs = self.headers(**headers)
        hdrs.pop("content-type", None)
        return await self.driver.open("DELETE", self.path, hdrs)

    # -------------------------------------------------------------- receiving

    def record(self, message: Any) -> Any:
        """Validate (at teardown) a message the server sent, against the negotiated revision."""
        revision = self.revision or PRE_NEGOTIATION
        if isinstance(message, list):  # a 2025-03-26 batch answer
            self.wire.record(message, revision, None)
        else:
            method = self._methods.get(message.get("id")) if "method" not in message else None
            self.wire.record(message, revision, method)
        return message

    def event_message(self, event: Event) -> Any:
        """The JSON-RPC message of an SSE event (recorded), or None for a priming event."""
        if not event.data:
            return None
        assert event.event in (None, "message"), event
        return self.record(event.json())

    async def messages(self, reply: Reply) -> list[Any]:
        """Every JSON-RPC message of a reply, read to its end."""
        assert reply.status == 200, (reply.status, await reply.read())
        if reply.content_type.startswith("application/json"):
            return [self.record(await reply.json())]
        assert reply.content_type.startswith("text/event-stream"), reply.headers
        out = []
        for event in await reply.events():
            msg = self.event_message(event)
            if msg is not None:
                out.append(msg)
        return out

    async def initialize(self, capabilities: dict[str, Any] | None = None, **headers: str | None) -> dict[str, Any]:
        rid = self.next_id()
        reply = await self.post(jsonrpc("initialize", init_params(self.offered, capabilities), rid), **headers)
        assert reply.status == 200, (reply.status, await reply.read())
        self.session_id = reply.headers.get("mcp-session-id")
        self.revision = self.offered  # the reference server answers the offered revision
        [answer] = await self.messages(reply)
        assert answer["id"] == rid and answer["result"]["protocolVersion"] == self.offered, answer
        self.init_reply = reply
        self.capabilities = answer["result"]["capabilities"]
        notified = await self.post(jsonrpc("notifications/initialized"))
        assert notified.status == 202, notified.status
        return answer["result"]

    async def call(self, method: str, params: dict[str, Any] | None = None, **headers: str | None) -> dict[str, Any]:
        """One request; its answer (result or error message) from the POST's reply."""
        rid = self.next_id()
        reply = await self.post(jsonrpc(method, params, rid), **headers)
        messages = await self.messages(reply)
        answers = [m for m in messages if m.get("id") == rid and "method" not in m]
        assert len(answers) == 1, messages
        assert messages[-1] is answers[0], "the response is the last message of its stream"
        return answers[0]

    async def result(self, method: str, params: dict[str, Any] | None = None, **headers: str | None) -> dict[str, Any]:
        answer = await self.call(method, params, **headers)
        assert "error" not in answer, answer
        return answer["result"]

    async def tool(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.result("tools/call", {"name": name, "arguments": arguments or {}})


# ============================================================================ fixtures and helpers


def reference_app(**options: Any) -> Any:
    """The reference server (``mcpkit serve``) as a fresh ASGI app."""
    from mcpkit.reference import server

    return server.http_app(**options)


class Clients:
    """Makes clients (each on its own driver) and, at the end, closes what they left open.

    Apps are closed too (``close_all``): the reference server is one object shared by the
    whole test run, and a session left registered with it would outlive this test's loop.
    """

    def __init__(self, wire: Any) -> None:
        self.wire = wire
        self.drivers: list[Any] = []
        self.apps: list[Any] = []

    def app(self, server: Any = None, **options: Any) -> Any:
        """A fresh ASGI app of ``server`` (default: the reference server), closed at teardown."""
        made = server.http_app(**options) if server is not None else reference_app(**options)
        self.apps.append(made)
        return made

    def asgi(self, app: Any, **options: Any) -> McpHttp:
        if all(app is not a for a in self.apps):
            self.apps.append(app)
        driver = AsgiDriver(app)
        self.drivers.append(driver)
        return McpHttp(driver, self.wire, **options)

    def tcp(self, port: int, *, source: str | None = None, **options: Any) -> McpHttp:
        driver = TcpDriver(port, source)
        self.drivers.append(driver)
        return McpHttp(driver, self.wire, **options)

    async def aclose(self) -> None:
        for driver in self.drivers:
            await driver.aclose()
        for app in self.apps:
            app.close_all()
        await asyncio.sleep(0)  # let the closed sessions' tasks see their cancellation


@pytest_asyncio.fixture
async def clients(wire: Any) -> AsyncIterator[Clients]:
    made = Clients(wire)
    yield made
    await made.aclose()


@pytest.fixture
def app(clients: Clients) -> Any:
    return clients.app()


@pytest.fixture
def client(app: Any, clients: Clients) -> McpHttp:
    return clients.asgi(app)


def assert_no_traceback(body: bytes) -> None:
    text = body.decode("utf-8", "replace")
    assert "Traceback" not in text and 'File "' not in text, text


async def error_reply(client: McpHttp, reply: Reply, status: int, code: int = -32600) -> dict[str, Any]:
    """An HTTP error with a JSON-RPC error body without id (HL-05, HS-02); its message text."""
    body = await reply.read()
    assert reply.status == status, (reply.status, body)
    assert_no_traceback(body)
    assert reply.content_type == "application/json", reply.headers
    message = client.record(json.loads(body))
    assert set(message) == {"jsonrpc", "error"}, message
    assert message["error"]["code"] == code, message
    return message["error"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def start_server(*extra: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``mcpkit serve --http 127.0.0.1:PORT`` on a free port, once it listens (stderr to a file);
    ``env``: variables set for it on top of this process's environment."""
    port = free_port()
    errlog = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        mcpkit_command("serve", "--http", f"127.0.0.1:{port}", *extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=errlog,
        env={**os.environ, **env} if env else None,
    )
    proc.errlog = errlog  # type: ignore[attr-defined]
    try:
        wait_listening(proc, port)
    except BaseException:
        stop_server(proc)
        raise
    return proc, port


def stop_server(proc: subprocess.Popen[bytes]) -> str:
    """Stop it (SIGTERM, then SIGKILL) and return what it wrote to stderr."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    errlog = proc.errlog  # type: ignore[attr-defined]
    errlog.seek(0)
    text = errlog.read().decode(errors="replace")
    errlog.close()
    return text


@pytest.fixture(scope="module")
def real_server() -> Iterable[int]:
    """A real uvicorn server (``mcpkit serve --http``) shared by this module's socket tests."""
    proc, port = start_server()
    yield port
    stderr = stop_server(proc)
    assert "Traceback" not in stderr, stderr


aio = pytest.mark.asyncio
SESSION_ID = re.compile(r"[0-9a-f]{32}")
ADD_2025_11_25 = {"content": [{"type": "text", "text": '{"result":5}'}], "structuredContent": {"result": 5}}
LOG_TEXTS = ["Tool execution started", "Tool processing data", "Tool execution completed"]
SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "This is a test response from the client"},
    "model": "test-model",
    "stopReason": "endTurn",
}


def call(name: str, arguments: dict[str, Any] | None = None, id: int = 1, token: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return jsonrpc("tools/call", params, id)


# ============================================================================ handshake and sessions


@aio
@pytest.mark.req("HL-06", "HL-07", "HL-08", "HL-09", "HL-15")
async def test_initialize_answers_on_a_primed_sse_stream_with_a_session_id(app, clients):
    client = clients.asgi(app)
    reply = await client.post(jsonrpc("initialize", init_params(), 1))
    assert reply.status == 200
    assert reply.content_type == "text/event-stream"
    assert reply.headers["x-accel-buffering"] == "no"
    session_id = reply.headers["mcp-session-id"]
    assert SESSION_ID.fullmatch(session_id), session_id  # os.urandom(16): 32 hex digits
    assert all(0x21 <= ord(c) <= 0x7E for c in session_id)  # HL-15: visible ASCII only

    # The stream: a priming event (an id, empty data, a retry), the answer, then the end (HL-08).
    priming, answer = await reply.events()
    assert priming == Event(id=priming.id, event=None, data="", retry=1000) and priming.id
    assert answer.event == "message" and answer.id and answer.id != priming.id and answer.retry is None
    client.revision = LATEST
    message = client.record(answer.json())
    assert message["id"] == 1 and message["result"]["protocolVersion"] == LATEST
    assert message["result"]["serverInfo"]["name"] == "mcpkit-reference"

    other = clients.asgi(app)
    await other.initialize()
    assert other.session_id != session_id and SESSION_ID.fullmatch(other.session_id or "")
    assert set(app.sessions) == {session_id, other.session_id}


@aio
@pytest.mark.parametrize("revision", ["2025-03-26", "2025-06-18", "2025-11-25"])
@pytest.mark.req("HL-09", "HL-14")
async def test_only_2025_11_25_streams_start_with_a_priming_event(clients, revision):
    app = clients.app(retry_ms=250)
    client = clients.asgi(app, revision=revision)
    await client.initialize()
    reply = await client.post(call("add", {"a": 2, "b": 3}, id=2))
    events = await reply.events()
    if revision >= "2025-11-25":
        priming = events.pop(0)
        assert priming.id and priming.data == "" and priming.retry == 250
    [answer] = events
    assert answer.id and answer.event == "message" and answer.retry is None  # every event is resumable
    message = client.event_message(answer)
    assert message["id"] == 2
    assert message["result"]["content"] == [{"type": "text", "text": '{"result":5}'}]


@aio
@pytest.mark.req("HL-16")
async def test_a_request_without_the_session_header_gets_400(client):
    await client.initialize()
    for reply in (
        await client.post(jsonrpc("tools/list", None, 2), mcp_session_id=None),
        await client.post(jsonrpc("notifications/roots/list_changed"), mcp_session_id=None),
        await client.get(mcp_session_id=None),
        await client.delete(mcp_session_id=None),
    ):
        error = await error_reply(client, reply, 400)
        assert error["message"] == "Missing Mcp-Session-Id header: send initialize first, then the id it returned."
    assert await client.result("ping") == {}  # the session itself is untouched


@aio
@pytest.mark.req("HL-17")
async def test_an_unknown_session_gets_404(client):
    await client.initialize()
    unknown = os.urandom(16).hex()
    for reply in (
        await client.post(jsonrpc("tools/list", None, 2), mcp_session_id=unknown),
        await client.get(mcp_session_id=unknown),
        await client.delete(mcp_session_id=unknown),
    ):
        error = await error_reply(client, reply, 404)
        assert error["message"] == "Session not found: it ended or expired; initialize a new one."


@aio
@pytest.mark.req("HL-17", "HL-18")
async def test_delete_ends_the_session_its_streams_and_its_stored_events(app, client):
    await client.initialize()
    listening = await client.get()
    assert (await listening.next_event()).data == ""  # primed
    assert await client.tool("add", {"a": 2, "b": 3}) == ADD_2025_11_25
    # completed POST streams were delivered to the end: they expire after the grace a reverse
    # proxy's client needs (RESUME_GRACE); the open GET stream stays resumable
    retiring = {sid for sid, log in app.event_store._streams.items() if log.expires is not None}
    assert set(app.event_store._streams) - retiring == {f"{client.session_id}.get"}
    assert len(retiring) == 2  # the initialize and tools/call answers

    deleted = await client.delete()
    assert deleted.status == 200 and await deleted.read() == b""
    assert await listening.events() == []  # the GET stream ended with the session
    for reply in (
        await client.post(jsonrpc("ping", None, 9)),
        await client.get(),
        await client.delete(),
    ):
        await error_reply(client, reply, 404)
    await asyncio.sleep(0.01)  # the store drops the session's streams in a task
    assert len(app.event_store) == 0, list(app.event_store._streams)
    assert app.sessions == {}


@aio
@pytest.mark.parametrize("verb", ["POST", "GET", "DELETE"])
@pytest.mark.req("HL-19")
async def test_an_unsupported_protocol_version_header_gets_400(client, verb):
    await client.initialize()
    if verb == "POST":
        reply = await client.post(jsonrpc("tools/list", None, 5), mcp_protocol_version="1999-01-01")
    elif verb == "GET":
        reply = await client.get(mcp_protocol_version="1999-01-01")
    else:
        reply = await client.delete(mcp_protocol_version="1999-01-01")
    error = await error_reply(client, reply, 400)
    assert error["message"].startswith("Unsupported MCP-Protocol-Version '1999-01-01'; supported: "), error
    assert "2025-11-25" in error["message"]
    assert await client.result("ping") == {}  # refused, not ended


@aio
@pytest.mark.parametrize("header", ["2025-11-25", "2025-06-18", "2025-03-26", None])
@pytest.mark.req("HL-19")
async def test_a_supported_or_missing_protocol_version_header_is_served(client, header):
    await client.initialize()
    reply = await client.post(jsonrpc("ping", None, 5), mcp_protocol_version=header)
    assert reply.status == 200
    assert await client.messages(reply) == [{"jsonrpc": "2.0", "id": 5, "result": {}}]


@aio
@pytest.mark.req("HL-04")
async def test_notifications_and_responses_alone_get_202_without_a_body(clients):
    app = clients.app()
    client = clients.asgi(app)
    await client.initialize()  # notifications/initialized: 202 (asserted inside)
    for message in (
        jsonrpc("notifications/cancelled", {"requestId": 999, "reason": "never sent"}),
        jsonrpc("notifications/roots/list_changed"),
        {"jsonrpc": "2.0", "id": 12345, "result": {}},  # a response to a request never made
        {"jsonrpc": "2.0", "id": 12346, "error": {"code": -32601, "message": "no"}},
    ):
        reply = await client.post(message)
        assert reply.status == 202 and await reply.read() == b""
        assert "content-type" not in reply.headers

    old = clients.asgi(app, revision="2025-03-26")
    await old.initialize()
    batch = [jsonrpc("notifications/roots/list_changed"), {"jsonrpc": "2.0", "id": 77, "result": {}}]
    reply = await old.post(batch)
    assert reply.status == 202 and await reply.read() == b""


# ============================================================================ JSON responses and batches


@aio
@pytest.mark.req("HL-06")
async def test_json_mode_answers_one_json_object(clients):
    app = clients.app(json_response=True)
    client = clients.asgi(app)
    await client.initialize()
    assert client.init_reply.content_type == "application/json"
    reply = await client.post(call("add", {"a": 2, "b": 3}, id=7))
    assert reply.status == 200 and reply.content_type == "application/json"
    assert client.record(await reply.json()) == {"jsonrpc": "2.0", "id": 7, "result": ADD_2025_11_25}

    # A client that takes only SSE still gets SSE; without json_response, a JSON-only client gets JSON.
    sse = await client.post(call("add", {"a": 2, "b": 3}, id=8), accept="text/event-stream")
    assert sse.content_type == "text/event-stream"
    assert [m["id"] for m in await client.messages(sse)] == [8]
    plain = clients.asgi(clients.app())
    await plain.initialize()
    reply = await plain.post(call("add", {"a": 2, "b": 3}, id=9), accept="application/json")
    assert reply.content_type == "application/json"
    assert plain.record(await reply.json()) == {"jsonrpc": "2.0", "id": 9, "result": ADD_2025_11_25}


@aio
@pytest.mark.req("HL-06", "HL-13")
async def test_json_mode_body_is_the_response_alone_and_progress_rides_the_get_stream(clients):
    client = clients.asgi(clients.app(json_response=True))
    await client.initialize()
    listening = await client.get()
    assert (await listening.next_event()).data == ""
    reply = await client.post(call("test_tool_with_progress", id=8, token="p-1"))
    assert reply.content_type == "application/json"
    body = client.record(await reply.json())
    assert body == {"jsonrpc": "2.0", "id": 8, "result": {"content": [{"type": "text", "text": "p-1"}]}}
    progress = [client.event_message(await listening.next_event()) for _ in range(3)]
    assert [m["params"] for m in progress] == [
        {"progressToken": "p-1", "progress": v, "total": 100, "message": f"Completed step {v} of 100"}
        for v in (0, 50, 100)
    ]


@aio
@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
@pytest.mark.req("HL-03", "HL-06", "HL-07")
async def test_a_2025_03_26_batch_is_answered_with_one_array(clients, json_response):
    client = clients.asgi(clients.app(json_response=json_response), revision="2025-03-26")
    await client.initialize()
    batch = [call("add", {"a": 2, "b": 3}, id=10), jsonrpc("prompts/list", None, 11), jsonrpc("notifications/roots/list_changed")]
    reply = await client.post(batch)
    assert reply.status == 200
    [answers] = await client.messages(reply)
    assert isinstance(answers, list)
    assert sorted(a["id"] for a in answers) == [10, 11]
    by_id = {a["id"]: a for a in answers}
    assert by_id[10]["result"] == {"content": [{"type": "text", "text": '{"result":5}'}]}  # no structuredContent yet
    assert [p["name"] for p in by_id[11]["result"]["prompts"]][0] == "test_simple_prompt"


@aio
@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25"])
@pytest.mark.req("HL-03", "HL-05", "LC-07")
async def test_a_batch_outside_2025_03_26_gets_400(clients, revision):
    app = clients.app()
    client = clients.asgi(app, revision=revision)
    await client.initialize()
    reply = await client.post([jsonrpc("tools/list", None, 3), jsonrpc("ping", None, 4)])
    error = await error_reply(client, reply, 400)
    assert error["message"] == (
        f"JSON-RPC batches are not accepted under protocol {revision}; batching exists only in protocol 2025-03-26."
    )
    # initialize is never batched: refused before any session exists
    fresh = clients.asgi(app)
    reply = await fresh.post([jsonrpc("initialize", init_params(), 1)])
    error = await error_reply(fresh, reply, 400)
    assert error["message"] == "initialize must not be part of a batch."
    assert "mcp-session-id" not in reply.headers and len(app.sessions) == 1


@aio
@pytest.mark.req("HL-03", "HL-07")
async def test_a_2025_03_26_batch_with_a_ping_is_answered_and_the_stream_ends(clients):
    client = clients.asgi(clients.app(), revision="2025-03-26")
    await client.initialize()
    reply = await client.post([jsonrpc("ping", None, 7), jsonrpc("tools/list", None, 8)])
    events = await asyncio.wait_for(reply.events(), 3)
    [answers] = [client.event_message(e) for e in events if e.data]
    assert sorted(a["id"] for a in answers) == [7, 8]


# ============================================================================ refused requests


@aio
@pytest.mark.req("HL-02", "HL-05", "BP-06")
async def test_accept_content_type_and_json_are_checked(client):
    await client.initialize()
    reply = await client.post(jsonrpc("ping", None, 2), accept="text/html")
    error = await error_reply(client, reply, 406)
    assert error["message"] == "Accept must include application/json or text/event-stream."
    reply = await client.get(accept="application/json")
    error = await error_reply(client, reply, 406)
    assert error["message"] == "Accept must include text/event-stream."

    reply = await client.post(jsonrpc("ping", None, 3), content_type="text/plain")
    error = await error_reply(client, reply, 415)
    assert error["message"] == "Content-Type must be application/json."

    reply = await client.post(None, body=b'{"jsonrpc": "2.0", "id": 4, "method": "ping"')
    error = await error_reply(client, reply, 400, code=-32700)
    assert error["message"] == "Parse error: the body is not valid UTF-8 JSON."
    reply = await client.post(None, body=b"\xff\xfe{}")
    await error_reply(client, reply, 400, code=-32700)
    reply = await client.post(None, body=b'"hello"')
    error = await error_reply(client, reply, 400, code=-32600)
    assert error["message"] == "A JSON-RPC message must be a JSON object."
    # an invalid message whose id could be read is answered with that id (BP-06)
    reply = await client.post(None, body=b'{"jsonrpc": "2.0", "id": 5, "method": 5}')
    assert reply.status == 400
    message = client.record(await reply.json())
    assert message["id"] == 5 and message["error"]["code"] == -32600
    assert await client.result("ping") == {}


@aio
async def test_other_methods_and_paths(client):
    await client.initialize()
    reply = await client.driver.open("PUT", "/mcp", client.headers(), b"{}")
    error = await error_reply(client, reply, 405)
    assert error["message"] == "Method not allowed."
    assert reply.headers["allow"] == "GET, POST, DELETE"
    reply = await client.driver.open("POST", "/elsewhere", client.headers(), json.dumps(jsonrpc("ping", None, 3)).encode())
    await error_reply(client, reply, 404)
    # a trailing slash is the same endpoint
    client.path = "/mcp/"
    assert await client.result("ping") == {}


@aio
@pytest.mark.parametrize(
    "headers, allowed",
    [
        ({"host": "evil.example.com"}, False),
        ({"host": "evil.example.com:8000"}, False),
        ({"host": "localhost.evil.example.com"}, False),
        ({"host": "127.0.0.1.evil.example.com:8000"}, False),
        ({"origin": "http://evil.example.com"}, False),
        ({"host": "evil.example.com", "origin": "http://evil.example.com"}, False),
        ({"origin": "http://localhost.evil.example.com:8000"}, False),
        ({"origin": "null"}, False),
        ({"host": "localhost:8000"}, True),
        ({"host": "127.0.0.1:8000"}, True),
        ({"host": "[::1]:8000"}, True),
        ({"host": "localhost"}, True),
        ({"host": "127.0.0.1:8000", "origin": "http://127.0.0.1:8000"}, True),
        ({"host": "localhost:8000", "origin": "http://localhost:8000"}, True),
        ({"origin": "http://[::1]:8000"}, True),
    ],
)
@pytest.mark.req("HS-01", "HS-02")
async def test_host_and_origin_outside_the_allow_list_get_403(app, clients, headers, allowed):
    client = clients.asgi(app)
    reply = await client.post(jsonrpc("initialize", init_params(), 1), **headers)
    if allowed:
        assert reply.status == 200
        assert SESSION_ID.fullmatch(reply.headers["mcp-session-id"])
        client.revision = LATEST
        [answer] = await client.messages(reply)
        assert answer["result"]["protocolVersion"] == LATEST
    else:
        error = await error_reply(client, reply, 403)
        assert error["message"].endswith("is not allowed; configure allowed_hosts to serve it.") or error[
            "message"
        ].endswith("is not allowed; configure allowed_origins to serve it."), error
        assert app.sessions == {}


@aio
@pytest.mark.req("HS-01", "HS-02", "HX-04")
async def test_every_endpoint_checks_host_and_origin(client):
    await client.initialize()
    evil = {"origin": "http://evil.example.com"}
    for reply in (
        await client.post(jsonrpc("ping", None, 2), **evil),
        await client.get(**evil),
        await client.delete(**evil),
        await client.driver.open("GET", "/sse", {"accept": "text/event-stream", **evil}),
        await client.driver.open("POST", "/messages/?session_id=x", {"content-type": "application/json", **evil}, b"{}"),
        await client.driver.open("GET", "/sse", {"accept": "text/event-stream", "host": "evil.example.com"}),
    ):
        await error_reply(client, reply, 403)
    assert await client.result("ping") == {}  # the refused DELETE ended nothing


@aio
@pytest.mark.req("HS-01", "HS-02")
async def test_allowed_hosts_and_origins_extend_the_loopback_defaults(clients):
    app = clients.app(allowed_hosts=["api.example.com"], allowed_origins=["https://app.example.com"])
    for headers, status in (
        ({"host": "api.example.com"}, 200),
        ({"host": "api.example.com:443", "origin": "https://api.example.com"}, 200),
        ({"host": "api.example.com", "origin": "https://app.example.com"}, 200),
        ({"host": "127.0.0.1:8000"}, 200),  # loopback stays allowed
        ({"host": "evil.example.com"}, 403),
        ({"host": "api.example.com", "origin": "https://evil.example.com"}, 403),
        ({"host": "app.example.com"}, 403),  # an allowed origin is not an allowed host
    ):
        client = clients.asgi(app)
        reply = await client.post(jsonrpc("initialize", init_params(), 1), **headers)
        if status == 200:
            client.revision = LATEST
            assert [m["id"] for m in await client.messages(reply)] == [1], headers
        else:
            await error_reply(client, reply, 403)


def _padded_ping(size: int) -> bytes:
    """A ping request exactly ``size`` bytes long."""
    base = b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":""}}'
    body = base.replace(b'"pad":""', b'"pad":"' + b"x" * (size - len(base)) + b'"')
    assert len(body) == size
    return body


@aio
@pytest.mark.req("HL-05")
async def test_a_body_over_max_body_bytes_gets_413_with_or_without_content_length(clients):
    app = clients.app(max_body_bytes=1024)
    client = clients.asgi(app)
    await client.initialize()
    headers = client.headers()

    for body, chunks in (
        (_padded_ping(1025), None),  # declared too large
        (b"", [_padded_ping(1025)[:600], _padded_ping(1025)[600:]]),  # chunked, no Content-Length
        (b"", [_padded_ping(4000)[i : i + 500] for i in range(0, 4000, 500)]),
    ):
        reply = await client.driver.open("POST", "/mcp", headers, body, chunks=chunks)
        error = await error_reply(client, reply, 413)
        assert error == {
            "code": -32600,
            "message": "Request body too large: the limit is 1024 bytes.",
            "data": {"limit": 1024},
        }

    for body, chunks in ((_padded_ping(1024), None), (b"", [_padded_ping(1024)[:512], _padded_ping(1024)[512:]])):
        client._methods[9] = "ping"
        reply = await client.driver.open("POST", "/mcp", headers, body, chunks=chunks)
        assert await client.messages(reply) == [{"jsonrpc": "2.0", "id": 9, "result": {}}]


# ============================================================================ session limits


@aio
@pytest.mark.req("HL-17")
async def test_an_idle_session_expires(clients):
    app = clients.app(session_idle_timeout=1.0)
    client = clients.asgi(app)
    await client.initialize()
    for _ in range(2):
        await asyncio.sleep(0.3)
        assert await client.result("ping") == {}  # use keeps it alive
    await asyncio.sleep(1.3)
    error = await error_reply(client, await client.post(jsonrpc("ping", None, 50)), 404)
    assert error["message"] == "Session not found: it ended or expired; initialize a new one."
    assert client.session_id not in app.sessions


@aio
@pytest.mark.req("HL-17")
async def test_max_sessions_keeps_the_most_recent(clients):
    # one client address holds them all: its quota is the whole cap here
    app = clients.app(max_sessions=3, max_sessions_per_client=3)
    made = [clients.asgi(app) for _ in range(10)]
    for c in made:
        await c.initialize()
        assert len(app.sessions) <= 3
    assert set(app.sessions) == {c.session_id for c in made[-3:]}
    for c in made[-3:]:
        assert await c.result("ping") == {}
    for c in made[:7]:
        await error_reply(c, await c.post(jsonrpc("ping", None, 99)), 404)


@aio
async def test_max_sessions_holds_while_every_session_has_an_open_stream(clients):
    app = clients.app(max_sessions=3, max_sessions_per_client=4)
    for _ in range(3):
        c = clients.asgi(app)
        await c.initialize()
        await c.get()
    extra = clients.asgi(app)
    reply = await extra.post(jsonrpc("initialize", init_params(), 1))
    assert len(app.sessions) <= 3
    # no session is idle: none is ended to make room, the newcomer is told when to come back
    assert reply.status == 503 and int(reply.headers["retry-after"]) > 0


@aio
async def test_an_ended_session_is_freed_by_reference_counting(clients):
    app = clients.app()
    client = clients.asgi(app)
    await client.initialize()
    hs = app.sessions[client.session_id]
    refs = {"_HttpSession": weakref.ref(hs), "ServerSession": weakref.ref(hs.session), "Engine": weakref.ref(hs.session.engine)}
    del hs
    gc.collect()
    gc.disable()
    try:
        deleted = await client.delete()
        assert deleted.status == 200
        await asyncio.sleep(0.01)
        alive = {name: ref() is not None for name, ref in refs.items()}
    finally:
        gc.enable()
    assert alive == {"_HttpSession": False, "ServerSession": False, "Engine": False}


# ============================================================================ what rides which stream


@aio
@pytest.mark.req("HL-07", "HL-13")
async def test_progress_and_log_notifications_ride_the_posts_stream(client):
    await client.initialize()
    listening = await client.get()
    assert (await listening.next_event()).data == ""
    assert await client.result("logging/setLevel", {"level": "debug"}) == {}

    reply = await client.post(call("test_tool_with_logging", id=20))
    messages = await client.messages(reply)
    assert [m.get("method") for m in messages] == ["notifications/message"] * 3 + [None]
    assert [m["params"] for m in messages[:3]] == [{"level": "info", "data": text} for text in LOG_TEXTS]
    assert messages[3] == {
        "jsonrpc": "2.0", "id": 20, "result": {"content": [{"type": "text", "text": "Tool with logging executed successfully"}]},
    }

    reply = await client.post(call("test_tool_with_progress", id=21, token="tok"))
    messages = await client.messages(reply)
    assert [m["params"] for m in messages[:3]] == [
        {"progressToken": "tok", "progress": v, "total": 100, "message": f"Completed step {v} of 100"} for v in (0, 50, 100)
    ]
    assert messages[3] == {"jsonrpc": "2.0", "id": 21, "result": {"content": [{"type": "text", "text": "tok"}]}}
    assert len(messages) == 4

    # None of it went to the GET stream too (HL-13): the next thing there is what we trigger now.
    await client.tool("test_trigger_tool_change")
    message = client.event_message(await listening.next_event())
    assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


@aio
@pytest.mark.req("HL-04", "HL-07")
async def test_sampling_rides_the_posts_stream_and_the_answer_is_posted_back(client):
    await client.initialize()
    reply = await client.post(call("test_sampling", {"prompt": "Test prompt for sampling"}, id=40))
    assert (await reply.next_event()).data == ""
    request = client.event_message(await reply.next_event())
    assert request["method"] == "sampling/createMessage"
    assert request["params"] == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt for sampling"}}],
        "maxTokens": 100,
    }
    answered = await client.post({"jsonrpc": "2.0", "id": request["id"], "result": SAMPLED})
    assert answered.status == 202 and await answered.read() == b""
    rest = [client.event_message(e) for e in await reply.events()]
    assert rest == [
        {
            "jsonrpc": "2.0",
            "id": 40,
            "result": {"content": [{"type": "text", "text": "LLM response: This is a test response from the client"}]},
        }
    ]


@aio
@pytest.mark.req("HL-01", "HL-11", "HL-12", "HL-13")
async def test_list_changed_rides_the_standalone_get_stream_and_a_second_get_gets_409(client):
    await client.initialize()
    listening = await client.get()
    assert listening.status == 200 and listening.content_type == "text/event-stream"
    priming = await listening.next_event()
    assert priming.id and priming.data == "" and priming.retry == 1000

    second = await client.get()
    error = await error_reply(client, second, 409)
    assert error["message"] == "A standalone stream is already open for this session."

    reply = await client.post(call("test_trigger_tool_change", id=30))
    assert [m["id"] for m in await client.messages(reply)] == [30]  # the POST stream: the response only
    changes = [client.event_message(await listening.next_event()) for _ in range(2)]
    assert changes == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}] * 2  # no response (HL-12)

    # once the first GET is gone, a new one may listen
    await listening.disconnect()
    again = await client.get()
    assert again.status == 200 and (await again.next_event()).data == ""


@aio
@pytest.mark.req("HL-13")
async def test_concurrent_posts_each_get_their_own_answer(clients):
    # A server of its own: the shared reference server's worker pool may still be busy with
    # sleeps that earlier tests abandoned, which would queue this test's sleep behind them.
    import time as _time

    from mcpkit import Server

    server = Server("workers")

    @server.tool
    def sleep(seconds: float) -> str:
        _time.sleep(seconds)
        return f"Slept {seconds} s"

    @server.tool
    def add(a: int, b: int) -> int:
        return a + b

    app = clients.app(server)
    client = clients.asgi(app)
    await client.initialize()
    replies = await asyncio.gather(*(client.post(jsonrpc("tools/list", None, 1000 + i)) for i in range(3)))
    answers = await asyncio.gather(*(client.messages(r) for r in replies))
    assert [[m["id"] for m in a] for a in answers] == [[1000], [1001], [1002]]
    # a blocking sync tool runs in a worker: a call made meanwhile is answered while it still runs
    slow = await client.post(call("sleep", {"seconds": 2}, id=1010))
    fast = await client.post(call("add", {"a": 2, "b": 3}, id=1011))
    assert [m["id"] for m in await client.messages(fast)] == [1011]
    assert app.sessions[client.session_id].session.in_flight == 1  # the sleep, still running
    assert [m["id"] for m in await client.messages(slow)] == [1010]


@aio
@pytest.mark.req("HL-05", "HL-13", "BP-06")
async def test_a_request_id_still_in_flight_is_refused_without_disturbing_the_first(client):
    await client.initialize()
    first = await client.post(call("sleep", {"seconds": 0.3}, id=5))
    second = await client.post(call("add", {"a": 2, "b": 3}, id=5))
    assert second.status == 400
    message = client.record(await second.json())
    assert message == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": -32600, "message": "This request id is already used by a request still in flight."},
    }
    assert await client.messages(first) == [
        {"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "Slept 0.3 s"}]}}
    ]


# ============================================================================ resumability


@aio
@pytest.mark.req("HL-09", "HL-10", "HL-14")
async def test_a_dropped_stream_resumes_with_last_event_id_without_loss_or_duplicates(real_server, clients):
    client = clients.tcp(real_server)
    await client.initialize()
    reply = await client.post(call("countdown", {"seconds": 3}, id=60, token="count"))
    assert reply.status == 200 and reply.content_type == "text/event-stream"
    priming = await reply.next_event()
    assert priming.data == "" and priming.retry == 1000 and priming.id
    first = await reply.next_event()
    first_message = client.event_message(first)
    assert first_message["params"] == {"progressToken": "count", "progress": 0, "total": 3, "message": "3 s left"}
    await reply.disconnect()  # the connection drops; the call goes on (HL-10)

    # meanwhile another request of the session has its own stream (and is never replayed below)
    assert await client.tool("add", {"a": 2, "b": 3}) == ADD_2025_11_25

    resumed = await client.get(last_event_id=first.id)
    assert resumed.status == 200 and resumed.content_type == "text/event-stream"
    events = await resumed.events()
    assert events[0].data == "" and events[0].retry == 1000  # the resumed stream is primed too
    later = [e for e in events[1:]]
    messages = [client.event_message(e) for e in later]
    assert [m.get("params", {}).get("progress") for m in messages[:2]] == [1, 2]
    assert messages[2] == {"jsonrpc": "2.0", "id": 60, "result": {"content": [{"type": "text", "text": "Lift-off"}]}}
    assert len(messages) == 3  # nothing lost, nothing twice, nothing of another stream (HL-14)

    # ids are unique and name their stream: the prefix before the counter
    ids = [priming.id, first.id] + [e.id for e in events]
    assert len(set(ids)) == len(ids)
    assert {i.rpartition("_")[0] for i in ids} == {priming.id.rpartition("_")[0]}

    # delivered to the end on a live connection: resumable for RESUME_GRACE more seconds (a
    # reverse proxy may have read the end for a client that had gone), then gone
    # (tests/stores/test_memory_event_ids.py checks the expiry itself)
    again = await client.get(last_event_id=events[-1].id)
    assert again.status == 200
    assert [e for e in await again.events() if e.data] == []


@aio
@pytest.mark.req("HL-14")
async def test_last_event_id_of_an_unknown_or_foreign_stream_gets_404(app, clients):
    one, two = clients.asgi(app), clients.asgi(app)
    await one.initialize()
    await two.initialize()
    reply = await one.post(call("countdown", {"seconds": 1}, id=5))
    primed = await reply.next_event()
    assert primed.id and primed.data == ""
    await reply.disconnect()  # a broken stream: resumable, by its own session only
    for last in ("nonsense", f"{one.session_id}.99_1", primed.id):
        client = two if last == primed.id else one
        error = await error_reply(client, await client.get(last_event_id=last), 404)
        assert error["message"] == "Unknown or expired Last-Event-ID."
    # the owner may resume it
    replay = await one.get(last_event_id=primed.id)
    assert [one.event_message(e)["id"] for e in await replay.events() if e.data and "id" in one.event_message(e)] == [5]


# ============================================================================ stateless


@aio
@pytest.mark.req("HL-11", "HL-15", "HL-19")
async def test_stateless_mode_has_no_session_and_every_post_stands_alone(clients):
    app = clients.app(stateless=True)
    client = clients.asgi(app)
    reply = await client.post(jsonrpc("initialize", init_params(), 1))
    assert reply.status == 200 and "mcp-session-id" not in reply.headers
    client.revision = LATEST
    events = await reply.events()
    assert [e.id for e in events] == [None]  # no event store: no ids, no priming
    assert client.event_message(events[0])["result"]["protocolVersion"] == LATEST

    # no initialized notification needed, no session header
    assert await client.tool("add", {"a": 2, "b": 3}) == ADD_2025_11_25
    assert await client.result("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, mcp_session_id=os.urandom(16).hex()) == ADD_2025_11_25
    # without MCP-Protocol-Version the server assumes 2025-03-26 (HL-19): no structuredContent then
    old = clients.asgi(app, revision="2025-03-26")
    old.revision = "2025-03-26"
    assert await old.tool("add", {"a": 2, "b": 3}) == {"content": [{"type": "text", "text": '{"result":5}'}]}
    error = await error_reply(client, await client.post(jsonrpc("ping", None, 3), mcp_protocol_version="1999-01-01"), 400)
    assert error["message"] == "Unsupported MCP-Protocol-Version '1999-01-01'."

    reply = await client.get()
    error = await error_reply(client, reply, 405)
    assert reply.headers["allow"] == "POST" and error["message"] == "No standalone stream in stateless mode."
    assert app.sessions == {}


# ============================================================================ legacy HTTP+SSE


@aio
@pytest.mark.req("HX-01", "HX-02", "HX-03", "HL-21")
async def test_legacy_sse_announces_the_endpoint_and_answers_on_the_stream(app, clients):
    client = clients.asgi(app, revision="2024-11-05")
    driver = client.driver
    stream = await driver.open("GET", "/sse", {"accept": "text/event-stream"})
    assert stream.status == 200 and stream.content_type == "text/event-stream"
    endpoint = await stream.next_event()
    assert endpoint.event == "endpoint"
    match = re.fullmatch(r"/messages/\?session_id=([0-9a-f]{32})", endpoint.data or "")
    assert match, endpoint

    async def send(message: dict[str, Any]) -> None:
        if "id" in message and "method" in message:
            client._methods[message["id"]] = message["method"]
        reply = await driver.open("POST", endpoint.data, {"content-type": "application/json"}, json.dumps(message).encode())
        assert reply.status == 202 and await reply.read() == b"Accepted"

    async def receive() -> dict[str, Any]:
        event = await stream.next_event()
        assert event.event == "message" and event.id is None, event
        return client.record(event.json())

    await send(jsonrpc("initialize", init_params("2024-11-05"), 1))
    client.revision = "2024-11-05"
    answer = await receive()
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == "2024-11-05"
    await send(jsonrpc("notifications/initialized"))
    await send(call("add", {"a": 2, "b": 3}, id=2))
    assert await receive() == {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": '{"result":5}'}]}}
    await send(call("test_tool_with_progress", id=3, token=7))
    messages = [await receive() for _ in range(4)]
    assert [m.get("params", {}).get("progress") for m in messages[:3]] == [0, 50, 100]
    assert messages[3]["id"] == 3

    for target in ("/messages/?session_id=" + os.urandom(16).hex(), "/messages/"):
        reply = await driver.open("POST", target, {"content-type": "application/json"}, b"{}")
        error = await error_reply(client, reply, 404)
        assert error["message"] == "Unknown session_id: open /sse first."
    await stream.disconnect()
    reply = await driver.open("POST", endpoint.data, {"content-type": "application/json"}, b"{}")
    await error_reply(client, reply, 404)
    assert app.legacy == {}


@aio
@pytest.mark.req("HX-01", "HL-21")
async def test_legacy_paths_are_configurable_and_can_be_switched_off(clients):
    off = clients.asgi(clients.app(legacy_sse=False))
    reply = await off.driver.open("GET", "/sse", {"accept": "text/event-stream"})
    await error_reply(off, reply, 404)
    moved = clients.asgi(clients.app(sse_path="/events", messages_path="/rpc"))
    stream = await moved.driver.open("GET", "/events", {"accept": "text/event-stream"})
    endpoint = await stream.next_event()
    assert endpoint.event == "endpoint" and re.fullmatch(r"/rpc\?session_id=[0-9a-f]{32}", endpoint.data or "")
    custom = clients.asgi(clients.app(path="/custom"), path="/custom")
    await custom.initialize()
    assert await custom.result("ping") == {}


# ============================================================================ failures stay inside


@aio
@pytest.mark.req("TL-10")
async def test_error_bodies_never_carry_a_traceback_even_when_handlers_raise(clients):
    from mcpkit import Server

    server = Server("exploding", "1.0.0")

    @server.tool
    def explode() -> str:
        """Raises."""
        raise RuntimeError("secret internal detail")

    @server.tool
    async def explode_later() -> str:
        """Raises, asynchronously."""
        raise ValueError("another secret")

    @server.resource("test://boom", name="boom")
    def boom() -> str:
        raise RuntimeError("resource secret")

    @server.prompt
    def broken() -> str:
        """Raises."""
        raise RuntimeError("prompt secret")

    for json_response in (False, True):
        client = clients.asgi(clients.app(server, json_response=json_response))
        await client.initialize()
        for method, params in (
            ("tools/call", {"name": "explode", "arguments": {}}),
            ("tools/call", {"name": "explode_later", "arguments": {}}),
            ("resources/read", {"uri": "test://boom"}),
            ("prompts/get", {"name": "broken"}),
        ):
            reply = await client.post(jsonrpc(method, params, client.next_id()))
            body = await reply.read()
            assert_no_traceback(body)
            assert b"secret" not in body, body
            if json_response:
                answer = client.record(json.loads(body))
            else:
                events = SseParser().feed(body)
                [answer] = [client.record(json.loads(e.data)) for e in events if e.data]
            if method == "tools/call":
                [content] = answer["result"]["content"]
                assert answer["result"]["isError"] is True
                assert re.fullmatch(
                    rf"Internal error while running tool '{params['name']}' \(correlation id [0-9a-f]{{16}}\)\.",
                    content["text"],
                ), content
            else:
                assert answer["error"]["code"] == -32603 and answer["error"]["message"] == "Internal error."
                assert re.fullmatch(r"[0-9a-f]{16}", answer["error"]["data"]["correlationId"])


# ============================================================================ a real server


@aio
@pytest.mark.req("HS-01", "HS-02", "HS-03")
async def test_a_real_server_binds_loopback_and_refuses_foreign_host_and_origin(real_server, clients):
    client = clients.tcp(real_server)
    reply = await client.post(
        jsonrpc("initialize", init_params(), 1), host="evil.example.com", origin="http://evil.example.com"
    )
    await error_reply(client, reply, 403)
    reply = await client.post(
        jsonrpc("initialize", init_params(), 1), host=f"127.0.0.1:{real_server}", origin=f"http://127.0.0.1:{real_server}"
    )
    assert reply.status == 200 and SESSION_ID.fullmatch(reply.headers["mcp-session-id"])
    client.revision = LATEST
    assert [m["id"] for m in await client.messages(reply)] == [1]
    # HS-03: `mcpkit serve --http 127.0.0.1:PORT` listens on loopback only
    assert listening_addresses(real_server) == {"127.0.0.1"}


def listening_addresses(port: int) -> set[str]:
    """The IPv4/IPv6 addresses a local TCP socket listens on for ``port`` (Linux /proc/net)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            pytest.skip("no /proc/net: cannot see which address the server listens on")
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, port_hex = local.rpartition(":")
                if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
                    raw = bytes.fromhex(address)
                    if len(raw) == 4:
                        found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                    else:
                        words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                        found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


@pytest.mark.asyncio
async def test_a_real_server_trusts_no_x_forwarded_for_by_default(clients):
    # uvicorn alone trusts X-Forwarded-For from 127.0.0.1: any local process could name itself
    # another client and spend that client's session quota (and rate limits, audit name)
    proc, port = start_server("--max-sessions-per-client", "2")
    try:
        victim = clients.tcp(port, source="127.0.0.2")
        await victim.initialize()
        for _ in range(4):
            await clients.tcp(port).initialize(x_forwarded_for="127.0.0.2")
        reply = await victim.post(jsonrpc("ping", {}, victim.next_id()))
        assert reply.status == 200, reply.status
    finally:
        assert "Traceback" not in stop_server(proc)


@aio
@pytest.mark.req("HL-05")
async def test_a_real_server_refuses_a_declared_oversize_body_before_reading_it(real_server, clients):
    client = clients.tcp(real_server)
    await client.initialize()
    reply = await client.driver.open("POST", "/mcp", {**client.headers(), "content-length": str(10 * 1024 * 1024)}, b"")
    error = await error_reply(client, reply, 413)
    assert error["data"] == {"limit": 4 * 1024 * 1024}


@aio
@pytest.mark.req("HL-09", "HL-14")
async def test_the_status_of_a_stream_goes_out_once_its_first_event_id_is_stored(clients):
    # the 200 went out before the priming event was stored: a process killed in between left a
    # client holding a stream with no event id, which no process could resume (nor a balancer
    # answer 502 for): the request was neither answered nor failed retryably
    app = clients.app()
    client = clients.asgi(app)
    await client.initialize()
    store = app.event_store
    real_store = store.store
    gate = asyncio.Event()
    storing = asyncio.Event()

    async def gated(stream_id: str, payload: bytes) -> str:
        storing.set()
        await gate.wait()  # a slow or paused store
        return await real_store(stream_id, payload)

    store.store = gated
    try:
        posting = asyncio.ensure_future(client.post(call("add", {"a": 2, "b": 3}, id=2)))
        await asyncio.wait_for(storing.wait(), STEP)
        await asyncio.sleep(0.05)  # the app runs on as far as it can
        assert not posting.done(), "the status went out before the stream's first event id was stored"
        store.store = real_store
        gate.set()
        reply = await asyncio.wait_for(posting, STEP)
    finally:
        store.store = real_store
        gate.set()
    assert reply.status == 200
    priming, answer = await reply.events()
    assert priming.id and priming.data == ""
    assert client.event_message(answer)["id"] == 2
