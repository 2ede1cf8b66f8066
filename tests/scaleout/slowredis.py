"""A TCP proxy in front of a redis-server that delays Redis's replies, switchable at run time.

``SlowProxy(target_port).start()`` listens on a free port of 127.0.0.1 (``.url``) and forwards
bytes both ways; ``.delay = 1.5`` makes every byte Redis sends arrive 1.5 s after Redis sent it
(the order is kept and pipelined replies are not serialised: each is late by the same amount),
``.delay = 0`` makes it prompt again. It runs an event loop of its own on a daemon thread, so a
test's loop (or a blocked server process) never holds it up.
"""

from __future__ import annotations

import asyncio
import threading
import time

__all__ = ["SlowProxy"]


class SlowProxy:
    def __init__(self, target_port: int, *, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        #: seconds each chunk Redis sends is held before it is passed on (read at arrival)
        self.delay = 0.0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="slow-redis-proxy", daemon=True)
        self._writers: set[asyncio.StreamWriter] = set()  # of every connection open, both ends
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> SlowProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.close()  # each connection's pumps see it end, and its handler returns
            await asyncio.gather(*self._handlers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _listen(self) -> asyncio.AbstractServer:
        return await asyncio.start_server(self._connection, "127.0.0.1", 0)

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            redis_r, redis_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            self._handlers.discard(task)
            return
        self._writers |= {client_w, redis_w}
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        pumps = [
            asyncio.ensure_future(self._pump(client_r, redis_w)),  # requests: as they come
            asyncio.ensure_future(self._hold(redis_r, held)),  # replies: stamped with when they are due
            asyncio.ensure_future(self._release(held, client_w)),  # ... and passed on then
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for writer in (client_w, redis_w):
                writer.close()
                self._writers.discard(writer)
            self._handlers.discard(task)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()

    async def _hold(self, reader: asyncio.StreamReader, held: asyncio.Queue[tuple[float, bytes]]) -> None:
        while data := await reader.read(65536):
            held.put_nowait((time.monotonic() + self.delay, data))
        held.put_nowait((0.0, b""))

    @staticmethod
    async def _release(held: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter) -> None:
        while True:
            due, data = await held.get()
            if not data:
                return
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)  # the delay this proxy exists to add
            writer.write(data)
            await writer.drain()
