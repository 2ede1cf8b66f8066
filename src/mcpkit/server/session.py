"""ServerSession: one connection's engine plus the handlers it runs.

Transport-agnostic: a transport feeds it frames and gives it a ``send``
callable that moves :class:`~mcpkit.protocol.engine.Outgoing` messages. Every
handler that may take time runs as its own task (or, when sync, in a worker
thread), so a slow tool never delays ``ping`` or another call.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.engine import (
    CancelRequested,
    Engine,
    NotificationReceived,
    Outgoing,
    RequestReceived,
    ResponseReceived,
    SessionStarted,
)
from ..protocol.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, McpError
from ..protocol.revisions import Revision
from .context import Context, level_rank

if TYPE_CHECKING:
    from .server import Server

__all__ = ["ServerSession"]

log = logging.getLogger("mcpkit")


def new_correlation_id() -> str:
    return uuid.uuid4().hex[:16]


class ServerSession:
    def __init__(
        self,
        server: Server,
        send: Callable[[list[Outgoing]], None],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.server = server
        self.loop = loop or asyncio.get_running_loop()
        self.engine = Engine(describe=server.describe)
        self._send = send
        self._tasks: dict[Any, asyncio.Future[Any]] = {}
        self._contexts: dict[Any, Context] = {}
        self._waiting: dict[Any, asyncio.Future[Any]] = {}
        self._flush_scheduled = False
        self.log_level: str | None = None  # None until logging/setLevel: server default applies
        self.subscriptions: set[str] = set()
        self.closed = False
        #: called when a request finishes, so a transport can resume reading (backpressure)
        self.on_request_done: Callable[[], None] | None = None

    @property
    def revision(self) -> Revision | None:
        return self.engine.revision

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    # ------------------------------------------------------------------ input

    def feed(self, frame: bytes | str) -> None:
        """Process one frame; call :meth:`flush` (or let the transport) to send what it caused."""
        for event in self.engine.receive(frame):
            t = type(event)
            if t is RequestReceived:
                self._on_request(event)
            elif t is CancelRequested:
                self._on_cancel(event)
            elif t is ResponseReceived:
                self._on_response(event)
            elif t is SessionStarted:
                self.server._session_started(self)
            elif t is NotificationReceived:
                self.server._on_client_notification(self, event.method, event.params)

    def flush(self) -> None:
        self._flush_scheduled = False
        if self.engine.outbox and not self.closed:
            self._send(self.engine.take_outbox())

    def schedule_flush(self) -> None:
        """Coalesce the answers finished in one loop iteration into one write."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    # ------------------------------------------------------------------ requests

    def _on_request(self, ev: RequestReceived) -> None:
        handler = self.server._methods.get(ev.method)
        rid = ev.id
        if handler is None:
            self.engine.respond_error(rid, McpError(METHOD_NOT_FOUND, f"Method not found: {ev.method}"))
            return
        try:
            outcome = handler(self, rid, ev.params or {})
        except McpError as exc:
            self.engine.respond_error(rid, exc)
            return
        except Exception:  # noqa: BLE001 - a bug in a handler must not take the server down
            self._internal_error(rid, ev.method)
            return
        if type(outcome) is dict:
            self.engine.respond(rid, outcome)
            return
        fut = outcome if isinstance(outcome, asyncio.Future) else self.loop.create_task(outcome)
        self._tasks[rid] = fut
        fut.add_done_callback(lambda f, rid=rid, method=ev.method: self._finished(rid, method, f))

    def _finished(self, rid: Any, method: str, fut: asyncio.Future[Any]) -> None:
        self._tasks.pop(rid, None)
        self._contexts.pop(rid, None)
        if not fut.cancelled():
            exc = fut.exception()
            if exc is None:
                self.engine.respond(rid, fut.result())
            elif isinstance(exc, McpError):
                self.engine.respond_error(rid, exc)
            else:
                self._internal_error(rid, method, exc)
            self.schedule_flush()
        if self.on_request_done is not None:
            self.on_request_done()

    def _internal_error(self, rid: Any, method: str, exc: BaseException | None = None) -> None:
        cid = new_correlation_id()
        log.error("internal error in %s (correlation id %s)", method, cid, exc_info=exc or True)
        self.engine.respond_error(
            rid, McpError(INTERNAL_ERROR, "Internal error.", {"correlationId": cid})
        )

    def context(self, rid: Any, method: str) -> Context:
        ctx = self._contexts.get(rid)
        if ctx is None:
            ctx = Context(self, rid, method, new_correlation_id())
            self._contexts[rid] = ctx
        return ctx

    def _on_cancel(self, ev: CancelRequested) -> None:
        # CN-01: the engine already forgot the request, so no response can go out for it.
        log.info("request %r cancelled by the client%s", ev.request_id, f": {ev.reason}" if ev.reason else "")
        ctx = self._contexts.get(ev.request_id)
        if ctx is not None:
            ctx.cancelled.set()
        fut = self._tasks.get(ev.request_id)
        if fut is not None:
            fut.cancel()

    # ------------------------------------------------------------------ server -> client

    def _on_response(self, ev: ResponseReceived) -> None:
        fut = self._waiting.pop(ev.id, None)
        if fut is None or fut.done():
            return
        if ev.error is None:
            fut.set_result(ev.result)
        else:
            err = ev.error
            fut.set_exception(McpError(err.get("code", INTERNAL_ERROR), str(err.get("message", "")), err.get("data")))

    async def request_client(
        self, method: str, params: dict[str, Any] | None, *, related: Any = None, timeout: float | None = None
    ) -> Any:
        """Send a request to the client and wait for its answer (LC-10: bounded by a timeout)."""
        rid = self.engine.send_request(method, params, related)
        fut: asyncio.Future[Any] = self.loop.create_future()
        self._waiting[rid] = fut
        self.flush()
        limit = self.server.client_request_timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(fut, limit)
        except TimeoutError:
            raise TimeoutError(f"the client did not answer {method} within {limit} s") from None
        finally:
            if self._waiting.pop(rid, None) is not None:
                # timed out or the handler was cancelled: tell the client to stop (LC-10, CN-02)
                self.engine.abandon_request(rid, "no longer needed")
                self.flush()

    async def ping(self, timeout: float | None = None) -> None:
        await self.request_client("ping", None, timeout=timeout)

    # ------------------------------------------------------------------ notifications

    def send_progress(self, rid: Any, progress: float, total: float | None, message: str | None) -> None:
        try:
            sent = self.engine.progress(rid, progress, total, message)
        except ValueError as exc:
            log.warning("progress not sent: %s", exc)
            return
        if sent:
            self.schedule_flush()

    def send_log(self, level: str, data: Any, logger: str | None, related: Any = None) -> None:
        threshold = self.log_level or self.server.log_level
        if level_rank(level) < level_rank(threshold):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        if related is not None and not self.engine.is_in_flight(related):
            related = None
        if self.engine.notify("notifications/message", params, related):
            self.schedule_flush()

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """A session-wide notification (list_changed, resources/updated), from any thread."""
        if self.closed:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self.loop:
            self.loop.call_soon_threadsafe(self.notify, method, params)
            return
        if self.engine.initialized or self.engine.revision is not None:
            if self.engine.notify(method, params):
                self.schedule_flush()

    # ------------------------------------------------------------------ shutdown

    async def drain(self, timeout: float) -> None:
        """Wait for in-flight handlers (bounded), so their responses are written before exit."""
        deadline = self.loop.time() + timeout
        # A finished future's done-callback (which writes the answer) runs on a later
        # loop turn: wait until every callback has run, i.e. until _tasks is empty.
        while self._tasks:
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                for f in list(self._tasks.values()):
                    f.cancel()
                await asyncio.sleep(0)
                break
            await asyncio.wait(list(self._tasks.values()), timeout=remaining)
            await asyncio.sleep(0)
        self.flush()

    def close(self) -> None:
        for fut in list(self._tasks.values()):
            fut.cancel()
        for fut in self._waiting.values():
            if not fut.done():
                fut.cancel()
        self.closed = True
        self.server._session_closed(self)
