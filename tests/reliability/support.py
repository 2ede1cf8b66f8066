"""Helpers shared by the reliability tests: real server processes, raw sockets, a plain HTTP
client, and readings from /proc (Linux)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import mcpkit_command
from tests.test_http import free_port, wait_listening

PROBE = str(Path(__file__).resolve().parent / "servers" / "cancel_probe.py")
REVISION = "2025-11-25"
MODERN = "2026-07-28"
BOTH = "application/json, text/event-stream"
STEP = 10.0  # bound on any single wait: a hang guard, never a performance assertion
CANCEL_WITHIN = 5.0  # hang guard: a cancelled handler's finally runs within this
MiB = 1024 * 1024


# ----------------------------------------------------------------------------- /proc


def proc_status(pid: int, key: str) -> int:
    """A number from /proc/PID/status (VmRSS in KiB, Threads as a count)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def rss_kib(pid: int) -> int:
    return proc_status(pid, "VmRSS")


def threads(pid: int) -> int:
    return proc_status(pid, "Threads")


def wait_for(predicate: Callable[[], Any], timeout: float = STEP, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes; its last verdict."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def has_traceback(text: str) -> bool:
    return "Traceback" in text


# ----------------------------------------------------------------------------- the probe's markers

_tags = itertools.count(1)


def new_tag(prefix: str) -> str:
    return f"{prefix}-{next(_tags)}"


class Markers:
    """The marker files of the probe's tools (servers/cancel_probe.py), in one directory."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def read(self, tag: str, suffix: str) -> str | None:
        path = self.dir / f"{tag}.{suffix}"
        return path.read_text() if path.exists() else None

    def wait(self, tag: str, suffix: str, timeout: float = CANCEL_WITHIN) -> str:
        found = wait_for(lambda: self.read(tag, suffix) is not None, timeout)
        assert found, f"no {tag}.{suffix} within {timeout} s (markers: {sorted(os.listdir(self.dir))})"
        return self.read(tag, suffix)  # type: ignore[return-value]


def assert_jsonrpc(message: Any) -> None:
    """One message the server sent: a JSON-RPC 2.0 request, notification or response (BP-01, BP-07)."""
    assert isinstance(message, dict), message
    assert message.get("jsonrpc") == "2.0", message
    if "method" in message:
        assert isinstance(message["method"], str) and message["method"], message
        return
    assert ("result" in message) != ("error" in message), message
    if "id" in message:
        assert type(message["id"]) in (str, int), message  # never null (BP-06)
    if "error" in message:
        error = message["error"]
        assert type(error.get("code")) is int and isinstance(error.get("message"), str), message


# ----------------------------------------------------------------------------- HTTP servers


class HttpServer:
    """``mcpkit serve [TARGET] --http 127.0.0.1:PORT [ARGS]`` on a free port, stderr to a file;
    ``command`` ``proxy`` (``mcpkit proxy --http ... ARGS``, the upstream after ``--`` in ARGS)
    or ``dev`` (``mcpkit dev [TARGET] --port PORT ARGS``) instead."""

    def __init__(self, *args: str, target: str | None = None, env: dict[str, str] | None = None,
                 command: str = "serve") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._errlog = tempfile.TemporaryFile()
        where = ["--port", str(self.port)] if command == "dev" else ["--http", f"127.0.0.1:{self.port}"]
        argv = mcpkit_command(command, *([target] if target else []), *where, *args)
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._errlog,
            env={**os.environ, **(env or {})},
        )
        try:
            wait_listening(self.proc, self.port)  # type: ignore[arg-type]
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        self._errlog.seek(0)
        return self._errlog.read().decode("utf-8", "replace")

    def stop(self) -> str:
        """SIGTERM (then SIGKILL); what it wrote to stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STEP)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STEP)
        text = self.stderr()
        self._errlog.close()
        return text


@contextlib.contextmanager
def serving(*args: str, **kwargs: Any) -> Iterator[HttpServer]:
    """An :class:`HttpServer` for a fixture's life, which must stop without a traceback."""
    server = HttpServer(*args, **kwargs)
    try:
        yield server
    finally:
        stderr = server.stop()
        assert not has_traceback(stderr), stderr[-3000:]


# ----------------------------------------------------------------------------- a plain HTTP client


def init_message(rid: Any = 1, version: str = REVISION) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0", "id": rid, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "mcpkit-reliability", "version": "1.0"}},
    }


def tool_call(rid: Any, name: str, arguments: dict[str, Any], token: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def sse_messages(body: bytes) -> list[Any]:
    """The JSON-RPC messages of an SSE body (events without data are skipped)."""
    out = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
        if data and any(data):
            out.append(json.loads(b"\n".join(data)))
    return out


class HttpClient:
    """One session over Streamable HTTP with httpx, the way an ordinary client talks."""

    def __init__(self, url: str, version: str = REVISION) -> None:
        self.url = url
        self.version = version
        self.http = httpx.Client(timeout=STEP)
        self.session_id: str | None = None
        self._ids = 0

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def headers(self, **extra: str) -> dict[str, str]:
        h = {"content-type": "application/json", "accept": BOTH}
        if self.session_id is not None:
            h["mcp-session-id"] = self.session_id
            h["mcp-protocol-version"] = self.version
        h.update({k.replace("_", "-"): v for k, v in extra.items()})
        return h

    def post(
        self, message: Any = None, *, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        content = body if body is not None else json.dumps(message).encode()
        return self.http.post(self.url, content=content, headers=headers if headers is not None else self.headers())

    @staticmethod
    def messages(response: httpx.Response) -> list[Any]:
        ctype = response.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            return sse_messages(response.content)
        if ctype.startswith("application/json"):
            return [response.json()]
        return []

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def initialize(self) -> dict[str, Any]:
        response = self.post(init_message(self.next_id(), self.version))
        assert response.status_code == 200, (response.status_code, response.text)
        self.session_id = response.headers["mcp-session-id"]
        [answer] = self.messages(response)
        notified = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert notified.status_code == 202, notified.status_code
        return answer["result"]

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        rid = self.next_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        response = self.post(message)
        assert response.status_code == 200, (response.status_code, response.text)
        answers = [m for m in self.messages(response) if m.get("id") == rid and "method" not in m]
        assert len(answers) == 1, response.text
        return answers[0]

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = self.call("tools/call", {"name": name, "arguments": arguments})
        assert "result" in answer, answer
        return answer["result"]


def assert_healthy(url: str) -> None:
    """A new client can initialize and call a tool: the server is up and serving."""
    with HttpClient(url) as client:
        client.initialize()
        assert client.tool("add", {"a": 2, "b": 3})["structuredContent"] == {"result": 5}


# ----------------------------------------------------------------------------- raw sockets


class Raw:
    """What a raw exchange brought back: the bytes, and how the connection ended."""

    def __init__(self, data: bytes, ended: str) -> None:
        self.data = data
        self.ended = ended  # "eof", "reset"

    @property
    def status(self) -> int | None:
        if not self.data.startswith(b"HTTP/1."):
            return None
        head = self.data.split(b"\r\n", 1)[0].split()
        return int(head[1]) if len(head) > 1 and head[1].isdigit() else None

    def final_status(self) -> int | None:
        """The last status line (after a ``100 Continue``)."""
        lines = [part.split() for part in self.data.split(b"\r\n") if part.startswith(b"HTTP/1.")]
        statuses = [int(words[1]) for words in lines if len(words) > 1 and words[1].isdigit()]
        return statuses[-1] if statuses else None

    @property
    def body(self) -> bytes:
        return self.data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in self.data else b""

    def __repr__(self) -> str:
        return f"Raw(ended={self.ended!r}, data={self.data[:300]!r})"


def raw_exchange(port: int, data: bytes, *, half_close: bool = True, timeout: float = STEP,
                 piece: int = 0, pause: float = 0.0, sock: socket.socket | None = None) -> Raw:
    """Send ``data`` on a fresh connection (or on ``sock``), then read until the server closes it.

    ``piece`` sends it in writes of that many bytes, ``pause`` seconds apart (a server must not
    judge a request by how it was cut up). The sending runs in a thread and its errors are
    ignored: a server may answer (413, 400) and close before it read everything. Fails when the
    server neither answers nor closes within ``timeout`` (a hang).
    """
    if sock is None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=STEP)
    sock.settimeout(timeout)
    if piece:  # each write its own segment, not coalesced by Nagle into fewer reads
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send() -> None:
        try:
            for start in range(0, len(data), piece or max(1, len(data))):
                if start and pause:
                    time.sleep(pause)
                sock.sendall(data[start:start + piece] if piece else data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    chunks: list[bytes] = []
    ended = "eof"
    try:
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except TimeoutError:
        seen = b"".join(chunks)[:300]
        raise AssertionError(f"the server neither answered nor closed within {timeout} s: {seen!r}") from None
    except ConnectionResetError:
        ended = "reset"
    finally:
        sender.join(STEP)
        sock.close()
    return Raw(b"".join(chunks), ended)


def http_request(port: int, method: str, headers: list[str], body: bytes = b"", *, target: str = "/mcp",
                 version: str = "HTTP/1.1", content_length: bool = True) -> bytes:
    """A request as bytes; ``headers`` as "Name: value" lines (Host is not added)."""
    lines = list(headers)
    if content_length:
        lines.append(f"Content-Length: {len(body)}")
    head = f"{method} {target} {version}\r\n" + "".join(h + "\r\n" for h in lines) + "\r\n"
    return head.encode("latin-1") + body
