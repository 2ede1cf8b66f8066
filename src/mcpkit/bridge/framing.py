"""Message framing on a byte stream: newline-delimited JSON, or length-prefixed frames.

An editor plugin or engine script speaks JSON-RPC over a TCP or Unix socket or a child's stdio;
what differs between them is how one message is cut from the next. Both framings here bound a
message's size (``max_bytes``): a peer that sends an endless line is a broken peer, and the link
is dropped rather than the server's memory filled.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, Protocol

from .. import _json

__all__ = ["Channel", "FrameError", "Framed", "Framing", "LengthPrefixed", "NdJson"]

DEFAULT_MAX_BYTES = 16 * 1024 * 1024


class FrameError(ConnectionError):
    """The peer sent something that is not a frame (too long, not JSON): the link is unusable."""


class Framing(Protocol):
    max_bytes: int

    def encode(self, message: Any) -> bytes: ...

    async def read(self, reader: asyncio.StreamReader) -> Any:
        """The next message, or None at a clean end of stream; FrameError on garbage."""
        ...


class NdJson:
    """One JSON value per line (``\\n``-terminated, UTF-8); blank lines are skipped."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 2:
            raise ValueError("max_bytes must be at least 2")
        self.max_bytes = max_bytes

    def encode(self, message: Any) -> bytes:
        return _json.dumps(message) + b"\n"  # orjson never emits a raw newline inside a value

    async def read(self, reader: asyncio.StreamReader) -> Any:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial.strip():
                    raise FrameError("the peer closed the connection in the middle of a message") from None
                return None
            except asyncio.LimitOverrunError:
                raise FrameError(f"the peer sent a line longer than {reader._limit} bytes") from None  # type: ignore[attr-defined]
            if len(line) > self.max_bytes:
                raise FrameError(f"the peer sent a message of {len(line)} bytes (limit {self.max_bytes})")
            if line.strip():
                return _decode(line)


#: the headers a length may be written in: an unsigned integer, with its byte order spelled out
#: (a plugin written in C# with BinaryWriter sends "<I", a Java or Go one usually ">I")
_HEADERS = {f"{order}{size}" for order in "<>!" for size in "HIQ"}


class LengthPrefixed:
    """A length, then that many bytes of UTF-8 JSON. ``header`` is the length's layout as a
    :mod:`struct` format: ``">I"`` (the default: 4 bytes, big-endian), ``"<I"`` (little-endian),
    ``">H"``/``"<H"`` (2 bytes) or ``">Q"``/``"<Q"`` (8 bytes)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, *, header: str = ">I") -> None:
        if max_bytes < 2:
            raise ValueError("max_bytes must be at least 2")
        if header not in _HEADERS:
            raise ValueError(f"header {header!r}: use one of {sorted(_HEADERS)} (byte order, then H, I or Q)")
        self.header = header
        self._size = struct.calcsize(header)
        self._largest = 2 ** (8 * self._size) - 1  # what the header can say
        self.max_bytes = min(max_bytes, self._largest)

    def encode(self, message: Any) -> bytes:
        body = _json.dumps(message)
        if len(body) > self._largest:
            raise ValueError(f"a message of {len(body)} bytes does not fit a {self.header!r} frame")
        return struct.pack(self.header, len(body)) + body

    async def read(self, reader: asyncio.StreamReader) -> Any:
        try:
            head = await reader.readexactly(self._size)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise FrameError("the peer closed the connection in the middle of a frame header") from None
            return None
        (size,) = struct.unpack(self.header, head)
        if size > self.max_bytes:
            raise FrameError(f"the peer announced a frame of {size} bytes (limit {self.max_bytes})")
        try:
            body = await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise FrameError("the peer closed the connection in the middle of a frame") from None
        return _decode(body)


class Channel(Protocol):
    """One open link as messages: what the RPC layer reads and writes. A byte stream and a
    framing make one (:class:`Framed`); a WebSocket is one by itself."""

    async def send(self, message: Any) -> None: ...

    def send_nowait(self, message: Any) -> None:
        """Queue ``message`` from the loop thread without waiting (a failure shows as a lost link)."""
        ...

    async def receive(self) -> Any:
        """The next message, None at a clean end; an exception when the link broke."""
        ...

    def close(self) -> None:
        """Close at once (idempotent, never raises)."""
        ...


class Framed:
    """A :class:`~mcpkit.bridge.transports.Link` (byte stream) cut into messages by a framing."""

    def __init__(self, link: Any, framing: Framing) -> None:
        self.link = link
        self.framing = framing

    async def send(self, message: Any) -> None:
        await self.link.write(self.framing.encode(message))

    def send_nowait(self, message: Any) -> None:
        self.link.writer.write(self.framing.encode(message))

    async def receive(self) -> Any:
        return await self.framing.read(self.link.reader)

    def close(self) -> None:
        self.link.close()


def _decode(data: bytes) -> Any:
    try:
        return _json.loads(data)
    except _json.JSONDecodeError as exc:
        raise FrameError(f"the peer sent a frame that is not JSON ({exc})") from None
