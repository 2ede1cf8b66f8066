"""An mcpkit HTTP server on the test's own event loop, behind a gate that injects what a load
balancer or a failover does to a client's requests: a status instead of the answer, a stream
cut cleanly after some events, a connection broken mid-stream.

    async with FaultyHttp(server, plan) as http:
        Client(http.url, ...)

``plan(request)`` picks what happens to each request (a :class:`Seen`); its default lets every
request through. Everything the gate saw is in ``http.requests`` (a :class:`Recorder`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from mcpkit import Server

_ID = re.compile(rb"^id: ?(\S+)$", re.M)


@dataclass(frozen=True)
class Refuse:
    """Answer with ``status`` (and ``headers``) instead of the server."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Cut:
    """Let the server answer, but end its stream once ``after`` JSON-RPC messages have gone
    through: at once (``lose_next=False``), or when the next message comes, which is then lost
    in flight, as when a connection dies with data in it. ``abort``: break the connection
    (an incomplete chunked body) rather than end the response."""

    after: int = 1
    lose_next: bool = False
    abort: bool = False


PASS = None


class Recorder:
    """Whatever it is called with, and a way to wait until that satisfies a predicate (a
    callback's record, or the requests a gate saw)."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self._changed = asyncio.Event()

    def __call__(self, item: Any) -> None:
        self.seen.append(item)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[list[Any]], Any], timeout: float = 5.0) -> Any:
        async with asyncio.timeout(timeout):
            while not (found := predicate(self.seen)):
                self._changed.clear()
                await self._changed.wait()
        return found


@dataclass
class Seen:
    """One request the gate saw: its method, path, headers (lower-case names), what was done to
    it, and the SSE event ids that reached the client."""

    method: str
    path: str
    headers: dict[str, str]
    action: Any = None
    event_ids: list[str] = field(default_factory=list)
    status: int | None = None


class FaultyHttp:
    def __init__(self, server: Server, plan: Callable[[Seen], Any] | None = None, **app_options: Any) -> None:
        self.server = server
        self.plan = plan or (lambda seen: PASS)
        self.app = server.http_app(**app_options)
        self.requests = Recorder()
        self.url = ""
        self._uvicorn: uvicorn.Server | None = None
        self._task: asyncio.Task[Any] | None = None

    def gets(self) -> list[Seen]:
        return [r for r in self.requests.seen if r.method == "GET"]

    async def __aenter__(self) -> FaultyHttp:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        config = uvicorn.Config(self._gate, log_level="error", lifespan="off", interface="asgi3",
                                timeout_graceful_shutdown=2)
        self._uvicorn = uvicorn.Server(config)
        self._task = asyncio.ensure_future(self._uvicorn.serve(sockets=[sock]))
        async with asyncio.timeout(10):
            while not self._uvicorn.started:  # uvicorn offers no event to await
                if self._task.done():
                    self._task.result()
                await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._uvicorn is not None and self._task is not None
        self.app.close_all()  # ends the streams still open, so that uvicorn need not wait for them
        self._uvicorn.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self._task, 10)

    async def _gate(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        seen = Seen(scope["method"], scope["path"], headers)
        self.requests(seen)
        seen.action = action = self.plan(seen)
        if isinstance(action, Refuse):
            seen.status = action.status
            head = [(b"content-type", b"application/json")]
            head += [(k.encode(), v.encode()) for k, v in action.headers]
            await send({"type": "http.response.start", "status": action.status, "headers": head})
            body = b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"injected"}}'
            await send({"type": "http.response.body", "body": body})
            return
        await self._forward(scope, seen, action, receive, send)

    async def _forward(self, scope: dict[str, Any], seen: Seen, cut: Cut | None, receive: Any, send: Any) -> None:
        ended = asyncio.Event()  # the gate ended the stream: the server must think the client left
        started = finished = False
        forwarded = 0

        async def to_client(message: dict[str, Any]) -> None:
            nonlocal started, finished, forwarded
            if ended.is_set():
                return  # sent into a connection that is gone
            if message["type"] == "http.response.start":
                started = True
                seen.status = message["status"]
            body = message.get("body", b"")
            if cut is not None and b'"jsonrpc"' in body:
                if forwarded >= cut.after:
                    ended.set()  # lose_next: this message dies in flight
                    return
                forwarded += 1
                if forwarded >= cut.after and not cut.lose_next:
                    await send(message)
                    seen.event_ids += [m.decode() for m in _ID.findall(body)]
                    ended.set()
                    return
            seen.event_ids += [m.decode() for m in _ID.findall(body)]
            finished = message["type"] == "http.response.body" and not message.get("more_body", False)
            await send(message)

        async def from_client() -> dict[str, Any]:
            if ended.is_set():
                return {"type": "http.disconnect"}
            reading = asyncio.ensure_future(receive())
            cutting = asyncio.ensure_future(ended.wait())
            await asyncio.wait({reading, cutting}, return_when=asyncio.FIRST_COMPLETED)
            cutting.cancel()
            if reading.done():
                return reading.result()
            reading.cancel()
            return {"type": "http.disconnect"}

        await self.app(scope, from_client, to_client)
        if cut is not None and ended.is_set() and started and not finished and not cut.abort:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        # abort: returning without ending the response makes uvicorn drop the connection
