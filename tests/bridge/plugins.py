"""Editor plugins with protocols of their own, each on its own thread: what a bridge meets when
the plugin was not written for mcpkit. A plugin is a listener (TCP with a framing, or a
WebSocket) and a function ``serve(message) -> replies``; tests make it slow, kill it mid-call,
send strays, stop it and start it again on the same port."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Self

from mcpkit import _json
from mcpkit.bridge.framing import NdJson

#: what a plugin does with one message: the messages it sends back (none, one, several)
Serve = Callable[[Any], list[Any] | Awaitable[list[Any]]]


class Hangup(Exception):
    """Raised by a ``serve`` function: the plugin drops the connection there and then (a crash)."""


class Listener:
    """A server on a thread and an event loop of its own, as an editor is to the bridge;
    subclasses say how it listens (``_listen``) and keep their connections in ``_peers``."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._peers: set[Any] = set()  # StreamWriters, or websockets' ServerConnections
        self._thread: threading.Thread | None = None

    async def _listen(self) -> Any:
        raise NotImplementedError

    def start(self) -> Self:
        ready = threading.Event()

        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()

            async def main() -> None:
                self._server = await self._listen()
                self.port = next(iter(self._server.sockets)).getsockname()[1]
                ready.set()

            loop.run_until_complete(main())
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(10), f"the fake {type(self).__name__} did not start"
        return self

    def stop(self) -> None:
        """Close the listener and drop every connection at once (the editor quit or crashed)."""
        loop = self._loop
        if loop is None:
            return

        async def shut() -> None:
            self._server.close()
            for peer in list(self._peers):
                peer.transport.abort()
            self._peers.clear()

        asyncio.run_coroutine_threadsafe(shut(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(10)
        self._loop = None


class Plugin(Listener):
    def __init__(self, serve: Serve, *, framing: Any = None, websocket: bool = False, port: int = 0) -> None:
        super().__init__(port)
        self.serve = serve
        self.framing = framing or NdJson()
        self.websocket = websocket
        self.received: list[Any] = []  # every message, in order
        self.connections = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/plugin"

    async def _listen(self) -> Any:
        if self.websocket:
            from websockets.asyncio.server import serve

            return await serve(self._serve_ws, "127.0.0.1", self.port)
        return await asyncio.start_server(self._serve_stream, "127.0.0.1", self.port)

    def send(self, message: Any) -> None:
        """Send ``message`` to every connection now (an event the plugin raises on its own)."""
        assert self._loop is not None
        for peer in list(self._peers):
            asyncio.run_coroutine_threadsafe(self._write(peer, message), self._loop).result(10)

    # ------------------------------------------------------------------ serving

    async def _write(self, peer: Any, message: Any) -> None:
        if self.websocket:
            await peer.send(_json.dumps_str(message))
        else:
            peer.write(self.framing.encode(message))
            await peer.drain()

    async def _answer(self, peer: Any, message: Any) -> None:
        self.received.append(message)
        try:
            replies = self.serve(message)
            if asyncio.iscoroutine(replies):
                replies = await replies
        except Hangup:
            peer.transport.abort()
            return
        for reply in replies:  # type: ignore[union-attr]
            await self._write(peer, reply)

    async def _serve_stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._peers.add(writer)
        self.connections += 1
        tasks: set[asyncio.Task[Any]] = set()
        try:
            while (message := await self.framing.read(reader)) is not None:
                task = asyncio.get_running_loop().create_task(self._answer(writer, message))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (ConnectionError, OSError):
            pass
        finally:
            self._peers.discard(writer)
            writer.close()

    async def _serve_ws(self, ws: Any) -> None:
        self._peers.add(ws)
        self.connections += 1
        tasks: set[asyncio.Task[Any]] = set()
        try:
            async for data in ws:
                task = asyncio.get_running_loop().create_task(self._answer(ws, _json.loads(data)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except Exception:  # noqa: BLE001 - a dropped connection ends this peer only
            pass
        finally:
            self._peers.discard(ws)
