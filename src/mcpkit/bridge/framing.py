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

__all__ = ["FrameError", "Framing", "LengthPrefixed", "NdJson"]

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


class LengthPrefixed:
    """A 4-byte big-endian length, then that many bytes of UTF-8 JSON."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 2:
            raise ValueError("max_bytes must be at least 2")
        self.max_bytes = max_bytes

    def encode(self, message: Any) -> bytes:
        body = _json.dumps(message)
        return struct.pack(">I", len(body)) + body

    async def read(self, reader: asyncio.StreamReader) -> Any:
        try:
            head = await reader.readexactly(4)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise FrameError("the peer closed the connection in the middle of a frame header") from None
            return None
        (size,) = struct.unpack(">I", head)
        if size > self.max_bytes:
            raise FrameError(f"the peer announced a frame of {size} bytes (limit {self.max_bytes})")
        try:
            body = await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise FrameError("the peer closed the connection in the middle of a frame") from None
        return _decode(body)


def _decode(data: bytes) -> Any:
    try:
        return _json.loads(data)
    except _json.JSONDecodeError as exc:
        raise FrameError(f"the peer sent a frame that is not JSON ({exc})") from None
