"""What a server tells whoever watches it: one call when a request arrives, one when it is
answered, one per client notification, one when a session closes.

The session calls these only when ``server.observer`` is set (``Server.observe``), so a server
nobody watches pays one attribute test per request. mcpkit.observe implements them for
OpenTelemetry and Prometheus; anything with these methods will do.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..protocol.engine import RequestReceived
    from ..protocol.errors import McpError
    from .session import ServerSession

__all__ = ["Observer", "Observers"]


class Observer(Protocol):
    def start(self, session: ServerSession, request: RequestReceived) -> Any:
        """A request arrived: the state to hand back to the other calls."""

    def enter(self, state: Any) -> Any:
        """The request's handler is about to run in this thread: a token for :meth:`exit`."""

    def exit(self, state: Any, token: Any) -> None: ...

    def bind_fn(self, state: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` runs the handler on another thread: run it in the request's context."""

    def bind_coro(self, state: Any, coro: Any) -> Any:
        """Likewise for a coroutine started on the event loop's thread."""

    def end(self, state: Any, result: dict[str, Any] | None, error: McpError | None) -> None:
        """Answered with ``result`` or ``error`` (both None: cancelled, no answer)."""

    def notification(self, session: ServerSession, method: str, params: Any) -> None: ...

    def session_started(self, session: ServerSession, version: str) -> None:
        """``initialize`` was answered (by the protocol engine, before any handler)."""

    def session_closed(self, session: ServerSession) -> None: ...


class Observers:
    """Several observers as one, called in order."""

    def __init__(self, observers: Sequence[Any]) -> None:
        self.observers = list(observers)

    def start(self, session: Any, request: Any) -> Any:
        return [o.start(session, request) for o in self.observers]

    def enter(self, state: Any) -> Any:
        return [o.enter(s) for o, s in zip(self.observers, state)]

    def exit(self, state: Any, token: Any) -> None:
        for o, s, t in reversed(list(zip(self.observers, state, token))):
            o.exit(s, t)

    def bind_fn(self, state: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
        for o, s in zip(self.observers, state or [None] * len(self.observers)):
            fn = o.bind_fn(s, fn)
        return fn

    def bind_coro(self, state: Any, coro: Any) -> Any:
        for o, s in zip(self.observers, state or [None] * len(self.observers)):
            coro = o.bind_coro(s, coro)
        return coro

    def end(self, state: Any, result: Any, error: Any) -> None:
        for o, s in zip(self.observers, state):
            o.end(s, result, error)

    def notification(self, session: Any, method: str, params: Any) -> None:
        for o in self.observers:
            o.notification(session, method, params)

    def session_started(self, session: Any, version: str) -> None:
        for o in self.observers:
            o.session_started(session, version)

    def session_closed(self, session: Any) -> None:
        for o in self.observers:
            o.session_closed(session)


_modules = sys.modules


def current_trace_ids() -> tuple[str, str] | None:
    """The OpenTelemetry trace and span ids of what runs now (hex), or None: no span, or
    OpenTelemetry not loaded at all (then this costs a dict look-up)."""
    trace = _modules.get("opentelemetry.trace")
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
