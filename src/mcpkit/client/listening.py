"""Whether a Client hears what the server sends outside its requests, and how it reconnects.

Over Streamable HTTP the server's notifications outside any request (list_changed, resource
updates, log messages) travel on one standalone GET stream (HL-12). That stream breaks: a load
balancer's 503 during a failover, a proxy's idle timeout, a server ending its streams so that
clients reconnect elsewhere. The transport reconnects with capped exponential backoff and jitter
and resumes from the last event id it saw (HL-14), and reports every change of state as a
:class:`StreamState`, so that it never stops listening without saying so.

Nothing here imports httpx: the types are public on every transport.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Backoff", "StreamState", "retry_after", "retryable"]

#: listening: the stream is open; retrying: it broke and reconnects after ``retry_in`` seconds;
#: stopped: nothing more arrives outside requests (``reason`` and ``status`` say why);
#: unsupported: the server offers no such stream (405, or 2026-07-28), which is normal
State = Literal["listening", "retrying", "stopped", "unsupported"]


@dataclass(frozen=True)
class StreamState:
    """The state of the stream that carries what the server sends outside requests: the GET
    stream of Streamable HTTP, the event stream of legacy SSE, a stdio server's stdout."""

    state: State
    #: why, in words (the status, the connection error, what to do about it)
    reason: str = ""
    #: the HTTP status behind this state, when there was one
    status: int | None = None
    #: retrying: how many reconnection attempts have failed in a row
    attempt: int = 0
    #: retrying: the seconds until the next attempt (the backoff, or the server's Retry-After)
    retry_in: float | None = None


@dataclass(frozen=True)
class Backoff:
    """How a broken stream is reconnected: attempt n waits ``first * factor**(n-1)`` seconds,
    at most ``cap``, less a random part of up to ``jitter`` of it, so that the clients of a
    server that failed do not all come back in the same instant. A server's ``retry`` field
    (HL-09) and ``Retry-After`` header lengthen the wait, never shorten it."""

    first: float = 0.5
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5

    def delay(self, attempt: int) -> float:
        exponent = min(max(attempt, 1) - 1, 64)  # 2.0 ** 1024 overflows: the cap is reached long before
        base = min(self.cap, self.first * self.factor**exponent)
        return base - random.uniform(0.0, base * min(max(self.jitter, 0.0), 1.0))


def retryable(status: int) -> bool:
    """A status that says "not now" rather than "never": timeouts, a stream still taken by a
    connection the server has not yet seen die (409), too many requests, server errors."""
    return status in (408, 409, 425, 429) or status >= 500


def retry_after(headers: Any) -> float | None:
    """The seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or None."""
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    from datetime import datetime, timezone
    from email.utils import parsedate_to_datetime  # rare: most servers send seconds

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
