"""Connection limits of ``mcpkit serve --http``: what uvicorn is told, and the one thing it lacks.

uvicorn bounds idle keep-alive connections (``timeout_keep_alive``), concurrent connections
(``limit_concurrency``: past it, new requests get 503) and the size of a request's head
(``h11_max_incomplete_event_size``). It has no deadline for a request's head: a client that
connects and says nothing, or sends its headers a byte at a time, holds a connection for ever,
and 500 of them hold 500. :class:`HeaderDeadlineH11` adds that deadline: a connection whose
request head has not arrived whole ``header_timeout`` seconds after it opened (or after the
previous response) is closed. The body has its own deadline in the app (http_body.py).

Imported only when serving HTTP with uvicorn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ConnectionLimits", "HeaderDeadlineH11"]


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
            "limit_concurrency": self.max_connections,
            "h11_max_incomplete_event_size": self.max_header_bytes,
        }


class HeaderDeadlineH11(H11Protocol):
    """uvicorn's h11 protocol, with a deadline on each request head (read from the config's
    ``mcpkit_header_timeout``, set by :func:`mcpkit.transports.serve.uvicorn_config`).

    The deadline runs from the connection's opening, and from the first bytes of each later
    head; between requests uvicorn's own keep-alive timeout closes a silent connection. A head
    that arrives whole in one read (the common case) costs one state check and no timer."""

    _deadline: Any = None

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        timeout = getattr(self.config, "mcpkit_header_timeout", ConnectionLimits.header_timeout)
        self._deadline = self.loop.call_later(timeout, self._head_overdue)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # a head begun, not yet whole
            if self._deadline is None and not self.transport.is_closing():
                self._arm()
        elif self._deadline is not None:  # the head is in: the body has the app's deadline
            self._deadline.cancel()
            self._deadline = None

    def _head_overdue(self) -> None:
        self._deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)
