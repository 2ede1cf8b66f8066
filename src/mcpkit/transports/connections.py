"""Connection limits of ``mcpkit serve --http``: what uvicorn is told, and what it lacks.

uvicorn bounds idle keep-alive connections (``timeout_keep_alive``) and concurrent connections
(``limit_concurrency``: past it, new requests get 503). It has no deadline for a request's head:
a client that connects and says nothing, or sends its headers a byte at a time, holds a
connection for ever, and 500 of them hold 500. :class:`HeaderDeadlineH11` adds that deadline: a
connection whose request head has not arrived whole ``header_timeout`` seconds after it opened
(or after the previous response) is closed. The body has its own deadline in the app
(http_body.py), and the rest of a body the app answered without reading (413, 404) must arrive
within the keep-alive timeout of that answer.

Nor does uvicorn bound a request head's size: ``h11_max_incomplete_event_size`` only limits a
head still incomplete when a read ends, so one that arrives whole in one read (asyncio reads up
to 256 KiB at once), or waits whole behind a pipelined request, was never measured.
:class:`HeadLimitedConnection` measures every head before h11 parses it.

Imported only when serving HTTP with uvicorn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .._extras import needs

with needs("http", "serving HTTP"):
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ConnectionLimits", "HeadLimitedConnection", "HeaderDeadlineH11"]

#: the end of a request head as h11 finds it (h11/_receivebuffer.py: a bare LF ends a line too)
_HEAD_END = re.compile(b"\n\r?\n")


@dataclass(frozen=True)
class ConnectionLimits:
    """The serve options (``mcpkit serve --http --help``; docs/deployment.md)."""

    #: seconds a request's head (request line and headers) may take to arrive
    header_timeout: float = 10.0
    #: seconds an idle keep-alive connection stays open between requests
    keep_alive_timeout: float = 5.0
    #: the most connections served at once; past it a request gets 503
    max_connections: int = 1000
    #: the largest request head accepted, in bytes (a bearer token rides in it)
    max_header_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for name in ("header_timeout", "keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a positive number of seconds")
        for name in ("max_connections", "max_header_bytes"):
            if not getattr(self, name) >= 1:
                raise ValueError(f"{name} must be a positive integer")

    def uvicorn_options(self) -> dict[str, Any]:
        return {
            "http": HeaderDeadlineH11,
            "timeout_keep_alive": self.keep_alive_timeout,
            # uvicorn refuses a request when the open connections, the asking one among them,
            # reach limit_concurrency: at max_connections it served one fewer, at 1 none
            "limit_concurrency": self.max_connections + 1,
            "h11_max_incomplete_event_size": self.max_header_bytes,
        }


class HeadLimitedConnection(h11.Connection):
    """h11's server side, refusing every request head longer than ``max_head_bytes`` (the
    request line, the headers and the blank line that ends them), however its bytes arrived.

    h11 raises its "Receive buffer too long" only when it runs out of data inside an event; a
    head that arrived whole was parsed whatever its size. Here a head is measured whenever h11
    waits for one (``their_state`` IDLE, so its receive buffer starts with the head) and may
    have it whole: when bytes arrive, and when a kept-alive connection's next cycle starts with
    a pipelined request already buffered. These are the only two ways into that state with
    bytes to parse, so every head is measured (in one read, in many, after another request),
    once per read or per request rather than once per event. An oversized head puts the
    client in h11's ERROR state, as h11's own errors do: uvicorn's next ``next_event`` gets
    the RemoteProtocolError and answers it as it answers h11's own limit (400, then close)."""

    def __init__(self, max_head_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.max_head_bytes = max_head_bytes

    def receive_data(self, data: bytes) -> None:
        super().receive_data(data)
        self._measure_head()

    def start_next_cycle(self) -> None:
        super().start_next_cycle()
        self._measure_head()

    def _measure_head(self) -> None:
        # Cheap first: a buffer no longer than the limit cannot hold a head over it, so a small
        # request costs one length check. A longer one (a head with its body, pipelined
        # requests) is searched for the head's end in its first max_head_bytes only: at most the
        # bytes h11 is about to search itself, in C.
        limit = self.max_head_bytes
        data = self._receive_buffer._data if _FAST_BUFFER else self.trailing_data[0]
        if len(data) > limit and self.their_state is h11.IDLE and _HEAD_END.search(data, 0, limit) is None:
            self._process_error(self.their_role)


def _fast_buffer() -> bool:
    """Whether h11 keeps the bytes received and not parsed yet in ``_receive_buffer._data``,
    starting with the first unparsed one (as h11 0.16 does), so they are read without a copy.
    Another h11 must not make every request fail: it gets the public copy, ``trailing_data``.
    Decided once, on a probe connection; test_hostile_connections.py checks the fast way is
    the one taken."""
    probe = h11.Connection(h11.SERVER)
    probe.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGE")
    probe.next_event()
    try:
        return bytes(probe._receive_buffer._data) == b"GE"
    except AttributeError:
        return False


_FAST_BUFFER = _fast_buffer()


class HeaderDeadlineH11(H11Protocol):
    """uvicorn's h11 protocol, with a deadline on each request head (read from the config's
    ``mcpkit_header_timeout``, set by :func:`mcpkit.transports.serve.uvicorn_config`) and a
    size limit on each (``h11_max_incomplete_event_size``, see :class:`HeadLimitedConnection`).

    The deadline runs from the connection's opening, and from the first bytes of each later
    head; between requests uvicorn's own keep-alive timeout closes a silent connection. A head
    that arrives whole in one read (the common case) costs one state check and no timer."""

    _deadline: Any = None
    #: the deadline of the rest of a body whose request was already answered
    _drain: Any = None

    def __init__(self, config: Any, server_state: Any, app_state: Any, _loop: Any = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        # uvicorn's own h11.Connection, made just now, is replaced before a byte arrives
        size = config.h11_max_incomplete_event_size
        self.conn = HeadLimitedConnection(size if size is not None else ConnectionLimits.max_header_bytes)

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        timeout = getattr(self.config, "mcpkit_header_timeout", ConnectionLimits.header_timeout)
        self._deadline = self.loop.call_later(timeout, self._head_overdue)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if self._drain is not None and state is not h11.SEND_BODY:  # drained in time
            self._drain.cancel()
            self._drain = None
            if state is h11.IDLE and not self.transport.is_closing():
                # between requests, as after an answer: idle for the keep-alive timeout, then
                # the head deadline from the next bytes (uvicorn cancels this timer on data)
                self._unset_keepalive_if_required()
                self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                    self.timeout_keep_alive_handler)
                return
        if state is h11.IDLE:  # a head begun, not yet whole
            if self._deadline is None and not self.transport.is_closing():
                self._arm()
        elif self._deadline is not None:  # the head is in: the body has the app's deadline
            self._deadline.cancel()
            self._deadline = None

    def _head_overdue(self) -> None:
        self._deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Answered before its body was read (413 by its Content-Length, 404, 401): uvicorn reads
        # the rest and drops it, and each byte of it cancels the keep-alive timer, while the
        # app's body deadline ended with the app. A client trickling such a body held its
        # connection for ever. The rest must now arrive within the keep-alive timeout.
        if self.conn.their_state is h11.SEND_BODY and self._drain is None and not self.transport.is_closing():
            self._drain = self.loop.call_later(self.timeout_keep_alive, self._drain_overdue)

    def _drain_overdue(self) -> None:
        self._drain = None
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._deadline, self._drain):
            if timer is not None:
                timer.cancel()
        self._deadline = self._drain = None
        super().connection_lost(exc)
