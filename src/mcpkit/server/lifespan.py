"""A server's lifespan: what it sets up before it serves and tears down after, as
``Server(lifespan=fn)`` (the spelling of FastMCP and the official SDK).

``fn(server)`` returns an async context manager (an ``@asynccontextmanager`` function). Every
transport enters it before it answers its first request, on the event loop its async handlers
run on, and leaves it once its requests in flight are answered: stdio when it starts and at end
of input or SIGTERM, HTTP at the ASGI lifespan's startup and shutdown, the in-memory client at
connect and close. Several transports of one server (two in-memory clients, a mount) share one
entry: the first entering runs the setup, the last leaving the teardown. What it yields is every
handler's ``ctx.lifespan_context``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Lifespan"]


class Lifespan:
    """The one entry of a server's lifespan, shared by the transports serving it."""

    __slots__ = ("fn", "state", "_cm", "_users", "_ready", "_lock")

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        if not callable(fn):
            raise TypeError(f"lifespan= takes a function of the server returning an async context manager "
                            f"(an @asynccontextmanager function), not {type(fn).__name__}")
        self.fn = fn
        #: what the context manager yielded, while it is entered; None otherwise
        self.state: Any = None
        self._cm: Any = None
        self._users = 0
        # resolved once the setup ran (or failed): a transport entering meanwhile, on this loop
        # or another thread's, waits for it rather than running the setup a second time
        self._ready: concurrent.futures.Future[None] | None = None
        self._lock = threading.Lock()

    async def enter(self, server: Any) -> None:
        """Run the setup if no transport has; raises what the setup raised."""
        with self._lock:
            self._users += 1
            first = self._users == 1
            if first:
                self._ready = concurrent.futures.Future()
            ready = self._ready
        assert ready is not None
        if not first:
            try:
                await asyncio.wrap_future(ready)
            except BaseException:
                with self._lock:
                    self._users -= 1
                raise
            return
        try:
            cm = self.fn(server)
            if not hasattr(cm, "__aenter__"):
                raise TypeError(f"lifespan {getattr(self.fn, '__qualname__', self.fn)!r} returned "
                                f"{type(cm).__name__}, not an async context manager: decorate it with "
                                "contextlib.asynccontextmanager and yield once")
            self.state = await cm.__aenter__()
            self._cm = cm
        except BaseException as exc:
            with self._lock:
                self._users -= 1
                self._ready = None
            ready.set_exception(exc)
            raise
        ready.set_result(None)

    async def exit(self) -> None:
        """Leave; the last transport to leave runs the teardown."""
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            cm, self._cm, self._ready = self._cm, None, None
        try:
            if cm is not None:
                await cm.__aexit__(None, None, None)
        finally:
            self.state = None
