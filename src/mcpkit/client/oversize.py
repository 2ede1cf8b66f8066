"""A message from the server larger than the client's ``max_message_bytes``: never held whole.

A transport reading such a message keeps only its first and last few KiB while it reads the
rest past (stdio: the line, client/transports.py; HTTP: the JSON body or the SSE event,
client/http.py), and :func:`message_id` finds which request it answers in what it kept, so that
request fails with :class:`~mcpkit.client.errors.MessageTooLarge` at once rather than waiting for
its timeout, and the connection carries on. Serializers put a response's ``id`` before its
result (mcpkit, the Python SDK: ``{"jsonrpc", "id", "result"}``) or last (the TypeScript SDK:
``{"result", "jsonrpc", "id"}``): the head is scanned for a top-level ``"id"`` member before the
first nested value ends the scan's certainty, the tail for one closing the object.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["EDGE", "Edges", "message_id", "bounded_body", "bounded_lines"]

#: bytes kept of each end of an oversized message
EDGE = 4096

_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_LAST_ID = re.compile(rb'[{,]\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')


class Edges:
    """The head and tail of a message read past in pieces, and its size."""

    __slots__ = ("head", "tail", "size")

    def __init__(self) -> None:
        self.head = b""
        self.tail = b""
        self.size = 0

    def add(self, piece: bytes) -> None:
        if len(self.head) < EDGE:
            self.head += piece[:EDGE - len(self.head)]
        self.tail = (self.tail + piece[-EDGE:])[-EDGE:]
        self.size += len(piece)


def message_id(head: bytes, tail: bytes) -> Any:
    """The top-level ``id`` of the response these are the ends of; None when neither shows it,
    or when the message is a request or notification (a top-level ``method``: the server's ids
    are not the client's)."""
    depth = 0
    key: bytes | None = None
    expect_key = after_colon = False
    found: Any = None
    for match in _TOKEN.finditer(head):
        token = match.group()
        if token in (b"{", b"["):
            depth += 1
            expect_key = depth == 1 and token == b"{"
            after_colon = False
        elif token in (b"}", b"]"):
            depth -= 1
            after_colon = False
        elif token == b",":
            expect_key = depth == 1
            after_colon = False
        elif token == b":":
            after_colon = depth == 1
        elif depth == 1 and expect_key and token.startswith(b'"'):
            key, expect_key = token, False
            if key == b'"method"':
                return None
        elif depth == 1 and after_colon:
            if key == b'"id"':
                found = _value(token)
            after_colon = False
    if found is not None:
        return found
    last = _LAST_ID.search(tail)
    return _value(last.group(1)) if last else None


def _value(token: bytes) -> Any:
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


async def bounded_body(response: Any, limit: int) -> bytes | Edges:
    """An HTTP body (httpx response, streamed): the bytes, or only the Edges once past ``limit``."""
    parts: list[bytes] = []
    size = 0
    edges: Edges | None = None
    async for chunk in response.aiter_bytes():
        if edges is not None:
            edges.add(chunk)
            continue
        size += len(chunk)
        parts.append(chunk)
        if size > limit:
            edges = Edges()
            for part in parts:
                edges.add(part)
            parts = []
    return edges if edges is not None else b"".join(parts)


_BREAK = re.compile(rb"[\r\n]")


async def bounded_lines(response: Any, limit: int) -> AsyncIterator[str | Edges]:
    """The lines of an SSE body (\\r\\n, \\r or \\n ends one); a line longer than ``limit``
    comes as its Edges, read past rather than held."""
    pending = bytearray()
    edges: Edges | None = None
    skip_lf = False  # a \r ended the last line: a \n right after it is part of that ending
    async for chunk in response.aiter_bytes():
        start = 0
        if skip_lf and chunk[:1] == b"\n":
            start = 1
        skip_lf = False
        while True:
            found = _BREAK.search(chunk, start)
            piece = chunk[start:found.start() if found else len(chunk)]
            if edges is not None:
                edges.add(piece)
            else:
                pending += piece
                if len(pending) > limit:
                    edges = Edges()
                    edges.add(bytes(pending))
                    pending.clear()
            if found is None:
                break
            if edges is not None:
                yield edges
                edges = None
            else:
                yield pending.decode("utf-8", errors="replace")
                pending.clear()
            start = found.end()
            if chunk[found.start():found.start() + 1] == b"\r":
                if chunk[start:start + 1] == b"\n":
                    start += 1
                elif start == len(chunk):
                    skip_lf = True
    if edges is not None:
        yield edges
    elif pending:
        yield pending.decode("utf-8", errors="replace")
