"""Request bodies on the HTTP app: their size cap, their read deadline, and where they are parsed.

- Size: a body over ``max_body_bytes`` gets 413, whether or not it declared its length.
- Time: a body must arrive whole within ``body_timeout`` seconds of the request's headers, or
  the request gets 408; a client trickling a byte at a time (slowloris) cannot hold a request
  open for ever. (Headers have their own deadline, set on the server: transports/connections.py.)
  One timer per app watches every body being read (a dict entry per read, not a timer per
  request: a timer per request would cost more than parsing a small body), so a deadline
  fires up to a quarter of ``body_timeout`` (at most 1 s) late.
- Place: a body larger than ``off_loop_bytes`` is parsed, validated and handed to its session
  in a thread, never on the event loop, so a burst of large bodies does not stall every other
  client's ping; smaller bodies keep the fast path on the loop. At most two large bodies are
  worked on at once: more would only share the same cores.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .. import _json
from ..protocol.errors import INVALID_REQUEST

__all__ = ["BodyReading", "DEFAULT_BODY_TIMEOUT", "DEFAULT_OFF_LOOP_BYTES"]

#: seconds a request's body may take to arrive whole
DEFAULT_BODY_TIMEOUT = 30.0
#: bodies larger than this are parsed off the event loop
DEFAULT_OFF_LOOP_BYTES = 256 * 1024
_monotonic = time.monotonic


class BodyReading:
    """The body steps of McpHttpApp (transports/http.py): it sets the three settings and
    provides ``_plain``."""

    loop: Any
    max_body_bytes: int
    body_timeout: float
    off_loop_bytes: int
    _body_pool: Any = None
    #: the bodies being read (their tasks) and when each must be in; those past it, cancelled
    _body_reads: dict[Any, float] | None = None
    _body_overdue: set[Any] | None = None
    _body_watch: Any = None
    _body_watch_loop: Any = None

    async def _plain(self, send: Any, status: int, body: bytes, headers: dict[bytes, bytes],
                     extra: list[tuple[bytes, bytes]] | None = None) -> None:
        raise NotImplementedError

    async def _read_body(self, receive: Any, send: Any, headers: dict[bytes, bytes]) -> bytes | None:
        """The whole body, or None when it was refused (413, 408: answered here) or cut short."""
        limit = self.max_body_bytes
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._too_large(send, headers)
            return None
        task = asyncio.current_task()
        reads = self._body_reads
        if reads is None:
            reads = self._body_reads = {}
            self._body_overdue = set()
        reads[task] = _monotonic() + self.body_timeout
        loop = self.loop  # the running loop: the app sets it on every request
        if self._body_watch is None or self._body_watch_loop is not loop:  # (an app may outlive a loop)
            every = min(1.0, max(0.02, self.body_timeout / 4))
            self._body_watch_loop = loop
            self._body_watch = loop.call_later(every, self._watch_bodies, loop, every)
        try:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None  # the client left before its body arrived: nothing to run, nobody to answer
            body = message.get("body", b"")
            if not message.get("more_body"):  # the fast path: the body came whole with its head
                if len(body) > limit:
                    await self._too_large(send, headers)
                    return None
                return body
            return await self._rest_of_body(receive, send, headers, body)
        except asyncio.CancelledError:
            overdue = self._body_overdue
            if overdue is None or task not in overdue:
                raise  # a cancellation from elsewhere (shutdown): not ours to answer
            overdue.discard(task)
            task.uncancel()  # type: ignore[union-attr]
        finally:
            reads.pop(task, None)
        await self._plain(send, 408, _error(
            f"The request body did not arrive within {self.body_timeout:g} s; send it whole, promptly."),
            headers, [(b"connection", b"close")])
        return None

    def _watch_bodies(self, loop: Any, every: float) -> None:
        """The body timer: cancel each read past its deadline; stop while nothing is read."""
        reads, overdue = self._body_reads, self._body_overdue
        assert reads is not None and overdue is not None
        now = _monotonic()
        for task, deadline in list(reads.items()):
            if deadline <= now:
                del reads[task]  # cancelled once only
                overdue.add(task)
                task.cancel()
        self._body_watch = loop.call_later(every, self._watch_bodies, loop, every) if reads else None

    async def _rest_of_body(self, receive: Any, send: Any, headers: dict[bytes, bytes], first: bytes) -> bytes | None:
        limit = self.max_body_bytes
        chunks = [first]
        size = len(first)
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None  # cut short (RFC 9112 §8: an incomplete message): never run a part of it
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_large(send, headers)
                return None
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def _too_large(self, send: Any, headers: dict[bytes, bytes]) -> None:
        await self._plain(
            send, 413,
            _error(f"Request body too large: the limit is {self.max_body_bytes} bytes.", {"limit": self.max_body_bytes}),
            headers,
        )

    def _is_large(self, body: bytes) -> bool:
        return len(body) > self.off_loop_bytes

    async def _off_loop(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in one of the body threads (for large bodies only)."""
        pool = self._body_pool
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor

            pool = self._body_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mcpkit-body")
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def _parse(self, body: bytes) -> Any:
        """The JSON of a body (raises JSONDecodeError), parsed off the loop when it is large."""
        if len(body) > self.off_loop_bytes:
            return await self._off_loop(_json.loads, body)
        return _json.loads(body)


def _error(message: str, data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": INVALID_REQUEST, "message": message}
    if data is not None:
        err["data"] = data
    return _json.dumps({"jsonrpc": "2.0", "error": err})
