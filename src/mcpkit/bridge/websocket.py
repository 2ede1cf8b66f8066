"""A plugin reached over a WebSocket: one JSON message per text frame.

Editor plugins written for browsers or on top of a web stack (a Node host, a C# HttpListener)
listen on ``ws://127.0.0.1:PORT/path`` rather than on a raw socket. The WebSocket protocol
(RFC 6455) is the ``websockets`` library's (``pip install 'mcpkit[websocket]'``), imported only
when such a bridge connects: a server that does not use one pays nothing for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import _json
from .._extras import needs
from .framing import DEFAULT_MAX_BYTES, FrameError

__all__ = ["WebSocket"]


@dataclass(frozen=True)
class WebSocket:
    """``ws://`` (or ``wss://``) URL of the plugin. Each message is one text frame of JSON
    (binary frames holding JSON are read too); ``max_bytes`` bounds a message (a larger one
    closes the link, as the stream framings do); ``headers`` go with the opening handshake (an
    ``Authorization`` the plugin wants); ``subprotocols`` are offered in it. No HTTP proxy is
    used: plugins listen on loopback. The framing of such a bridge is the WebSocket's own, so
    ``RpcBridge(framing=...)`` is refused with it."""

    url: str
    headers: Mapping[str, str] | None = field(default=None, hash=False)
    subprotocols: Sequence[str] | None = None
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        if not self.url.startswith(("ws://", "wss://")):
            raise ValueError(f"WebSocket({self.url!r}): the URL must start with ws:// or wss://")
        if self.max_bytes < 2:
            raise ValueError("max_bytes must be at least 2")
        # a missing library is the user's set-up, said in one line where the server is declared
        # (mcpkit serve exits 2 with it), not a connect failure retried forever in the background
        with needs("websocket", "mcpkit.bridge.WebSocket"):
            import websockets  # noqa: F401 - its package only: the protocol modules load on connect

    async def connect(self) -> _WebSocketChannel:
        with needs("websocket", "a bridge over a WebSocket"):
            from websockets.asyncio.client import connect
            from websockets.exceptions import ConnectionClosed, ConnectionClosedOK
        # no open_timeout of its own: the bridge's connect_timeout bounds the whole connect;
        # keepalive pings stay on (a dead peer behind a live TCP socket is found by them too)
        conn = await connect(self.url, additional_headers=dict(self.headers) if self.headers else None,
                             subprotocols=list(self.subprotocols) if self.subprotocols else None,
                             max_size=self.max_bytes, proxy=None, open_timeout=None, close_timeout=2)
        return _WebSocketChannel(conn, ConnectionClosed, ConnectionClosedOK)

    def describe(self) -> str:
        return self.url


class _WebSocketChannel:
    """An open WebSocket as a :class:`~mcpkit.bridge.framing.Channel`."""

    def __init__(self, conn: Any, closed: type[Exception], closed_ok: type[Exception]) -> None:
        self._conn = conn
        self._closed, self._closed_ok = closed, closed_ok  # websockets' own, imported by connect()
        self._tasks: set[asyncio.Task[Any]] = set()  # sends and the close in flight (the loop keeps weak refs)

    async def send(self, message: Any) -> None:
        try:
            await self._conn.send(_json.dumps_str(message))
        except self._closed as exc:
            raise ConnectionError(f"the WebSocket is closed ({exc})") from None

    def send_nowait(self, message: Any) -> None:
        task = asyncio.get_running_loop().create_task(self.send(message))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():  # the bridge's loop is stopping: drop the socket rather than leak it
            with contextlib.suppress(Exception):
                self._conn.transport.abort()
        else:
            task.exception()  # a failed send shows as a lost link on the reader's side

    async def receive(self) -> Any:
        try:
            data = await self._conn.recv()
        except self._closed_ok:
            return None
        except self._closed as exc:
            raise ConnectionError(f"the WebSocket broke ({exc})") from None
        try:
            return _json.loads(data)
        except _json.JSONDecodeError as exc:
            raise FrameError(f"the peer sent a frame that is not JSON ({exc})") from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            task = asyncio.get_running_loop().create_task(self._conn.close())
            self._tasks.add(task)
            task.add_done_callback(self._done)
