"""The HTTP app's graceful shutdown: the streams a client holds end, requests in flight get a deadline.

uvicorn's graceful shutdown stops accepting connections, then waits for every request in progress
to end, and only after that sends the ASGI lifespan ``shutdown`` event. An SSE stream does not end
by itself: one client holding its standalone GET stream (every SDK client, the Inspector and
Claude Code open one) held the process until the timeout, which then cancelled the stream with a
traceback. So the app learns of the shutdown as it begins, and ends its streams as the
specification lets a server:

- at once, the standalone GET streams (HL-12: the server MAY close it at any time; the client
  reconnects, behind a balancer to another process) and the legacy ``/sse`` streams of sessions
  with nothing in flight; listen streams end with their result (SB-05). A new GET gets 503;
- a POST's stream ends with its last answer, as always (HL-08: not before its response); a legacy
  stream with requests in flight, after their answers;
- at the deadline (``shutdown_timeout``), each request still running is answered with an error and
  its handler cancelled, and every session is closed: nothing is left for the server to wait for.

How the app learns of it. ``mcpkit serve --http`` (transports/graceful.py) calls
:meth:`Draining.drain` as its shutdown begins. Under a server of the user's own (``uvicorn
module:app``, ``--workers``, gunicorn's uvicorn workers), the app, once started on the main thread,
puts a handler of its own in front of the SIGTERM and SIGINT handlers that server installed: the
signal begins the drain as well as the server's shutdown, and a second SIGINT (uvicorn's quit
without waiting) ends everything at once. Where nobody handles a signal (its default action
stands) or off the main thread, nothing is installed.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import weakref
from typing import Any

from ..protocol.errors import INTERNAL_ERROR, McpError

__all__ = ["Draining", "apps_on", "SHUTDOWN_ERROR"]

log = logging.getLogger("mcpkit.http")

#: the answer of a request still running at the deadline: the client may send it again elsewhere
SHUTDOWN_ERROR = McpError(INTERNAL_ERROR, "The server is shutting down and the request did not finish in time; "
                                          "send it again.")

#: the apps started on some loop; weak: an app dropped by its user is not kept for this
_STARTED: weakref.WeakSet[Draining] = weakref.WeakSet()


def apps_on(loop: Any) -> list[Draining]:
    """The apps running on ``loop`` (started by their lifespan or a first request)."""
    return [app for app in list(_STARTED) if app.loop is loop]


class Draining:
    """The shutdown steps of McpHttpApp (transports/http.py), which sets the attributes below."""

    loop: Any
    sessions: Any
    legacy: dict[str, Any]
    server: Any
    #: seconds requests in flight get once the drain begins (``http_app(shutdown_timeout=...)``)
    shutdown_timeout: float
    #: the sessions of no session id (stateless, 2026-07-28), while their POST lasts
    _passing: weakref.WeakSet[Any]
    _drain_started: float | None = None
    _drain_timer: Any = None
    _expired = False

    def close_all(self) -> None:
        raise NotImplementedError

    def _started(self, loop: Any) -> None:
        """The app runs on ``loop`` from now on: a server running it on the main thread may
        signal its shutdown."""
        self._drain_started = None
        self._expired = False
        _STARTED.add(self)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                _chain(sig, self, loop)

    @property
    def draining(self) -> bool:
        return self._drain_started is not None

    def drain(self, timeout: float | None = None) -> None:
        """Begin the graceful shutdown (on the app's loop): end the standalone streams now, and
        answer the requests still running ``timeout`` seconds after the first call (default
        :attr:`shutdown_timeout`; ``math.inf``: never) with an error. A later call moves that
        deadline, from the same start."""
        loop = self.loop
        if loop is None or self._expired:
            return
        if self._drain_started is None:
            self._drain_started = loop.time()
            for hs in list(self.sessions.values()):
                hs.session.end_listens()
                hs.end_standalone()
            for hs in list(self.legacy.values()):
                hs.end_standalone()
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        delay = self.shutdown_timeout if timeout is None else timeout
        if delay != math.inf:
            self._drain_timer = loop.call_at(self._drain_started + delay, self.expire)

    def expire(self) -> None:
        """The deadline (or a forced quit): every request still running is answered with
        :data:`SHUTDOWN_ERROR` and its handler cancelled; then every session is closed."""
        loop = self.loop
        if loop is None or self._expired:
            return
        self._expired = True
        if self._drain_started is None:
            self._drain_started = loop.time()
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        for hs in [*self.sessions.values(), *self.legacy.values(), *self._passing]:
            hs.session.fail_in_flight(SHUTDOWN_ERROR)
        # after those answers: a worker thread's answer reaches its stream in a callback of the
        # loop scheduled already, and closing a session pushes the end of its streams after it
        loop.call_soon(self.close_all)

    def _signalled(self, signum: int) -> None:
        if self._drain_started is None:
            self.drain()
        elif signum == signal.SIGINT:  # a second Ctrl-C: the server quits without waiting
            self.expire()

    def _flush_audit(self) -> None:
        """Write the policy's buffered audit lines now: a process ended by its signal (uvicorn
        raises it again once shut down) runs no exit handlers."""
        flush = getattr(getattr(getattr(self.server, "policy", None), "audit", None), "flush", None)
        if flush is not None:
            try:
                flush()
            except OSError as exc:
                log.warning("could not write the audit log: %s", exc)


class _SignalHook:
    """In front of a server's handler of a signal: the app's drain begins too (on its loop)."""

    __slots__ = ("app", "loop", "previous")

    def __init__(self, app: Draining, loop: Any, previous: Any) -> None:
        self.app = app
        self.loop = loop
        self.previous = previous

    def __call__(self, signum: int, frame: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.app._signalled, signum)
        except RuntimeError:  # the loop has ended: nothing of the app's is left to end
            pass
        self.previous(signum, frame)


def _chain(sig: int, app: Draining, loop: Any) -> None:
    current = signal.getsignal(sig)
    if not callable(current) or current is signal.default_int_handler:
        return  # nobody shuts down gracefully on it: a KeyboardInterrupt, or the default action
    handler = current
    while isinstance(handler, _SignalHook):
        if handler.app is app and handler.loop is loop:
            return  # chained already (the lifespan, then the first request)
        handler = handler.previous
    try:
        signal.signal(sig, _SignalHook(app, loop, current))
    except ValueError:  # not the main interpreter
        pass
