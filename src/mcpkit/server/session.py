"""ServerSession: one connection's engine plus the handlers it runs.

Transport-agnostic and thread-safe: a transport feeds it frames from any
thread and gives it a ``send`` callable that moves
:class:`~mcpkit.protocol.engine.Outgoing` messages. The engine is guarded by one
lock, and ``send`` is always called under it, so messages leave in the order
the engine queued them (a request's progress never overtakes its response).

Handlers never run under the lock. Async handlers run as tasks on the
session's event loop; sync handlers run where the transport says
(:attr:`run_sync`): the stdio transport runs them inline on its reader thread
and hands reading to a fresh thread when one blocks (see transports/stdio.py),
asyncio transports run them in the server's worker threads. Either way a slow
handler never delays ``ping`` or other calls.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import os
import threading
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
from ..protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, McpError, clipped
from .features import FEATURE_OF_METHOD
from ..protocol.revisions import Revision
from .context import ClientRequestError, ClientTimeoutError, Context, calling_request, level_rank

if TYPE_CHECKING:
    from .server import Server

__all__ = ["OffloadedCall", "ServerSession", "SyncCall"]

log = logging.getLogger("mcpkit")


def _is_cancelled(exc: BaseException) -> bool:
    # asyncio.CancelledError and concurrent.futures.CancelledError, without importing either
    return type(exc).__name__ == "CancelledError"


_CID_PREFIX = os.urandom(5).hex()
_cid_counter = itertools.count(1)


def new_correlation_id() -> str:
    """16 hex digits, unique across processes (a random per-process prefix) and cheap (a
    counter, no system call per request). It names a request in logs; it is not a secret."""
    return f"{_CID_PREFIX}{next(_cid_counter):06x}"


class _InWorker:
    """Marks a sync handler running in a worker thread: it cannot be interrupted, only ignored."""

    __slots__ = ()

    def cancel(self) -> bool:
        return False


_RUNNING_IN_WORKER = _InWorker()


class SyncCall:
    """A sync handler invocation a dispatch function asks the session to run: ``fn()`` -> result dict."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], dict[str, Any]]) -> None:
        self.fn = fn


class OffloadedCall(SyncCall):
    """A SyncCall run on a worker even where sync calls run inline (a call that may become a
    task: its input comes by later requests, which the reader must stay free to read)."""

    __slots__ = ()


def on_loop_thread(loop: Any) -> bool:
    """True when the calling thread is the one running ``loop``.

    Asked of the running loop itself, never of a loop's private attributes: asyncio's
    ``_thread_id`` does not exist on uvloop's loop, so a check built on it answered "another
    thread" on the loop's own thread, and a hand-off that then waited for the loop (a server
    request such as sampling, a nested call) waited for ever (README: uvloop is what
    ``mcpkit[fast]`` and ``uvicorn[standard]`` install).
    """
    if loop is None:
        return False
    global _running_loop
    if _running_loop is None:  # asyncio is imported only once a loop exists (stdio start-up)
        from asyncio import _get_running_loop as _running_loop
    return _running_loop() is loop


_running_loop: Callable[[], Any] | None = None


def partial_run(context: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` to be run in ``context`` (a contextvars.Context), on whichever thread calls it."""
    return lambda: context.run(fn)


def _carry(events: list[Any], access_token: Any) -> None:
    for event in events:
        if type(event) is RequestReceived:
            event.access_token = access_token


def caller_of(session: Any) -> str:
    """Who calls, as rate limits and audit lines name them: the session's principal; in the
    session that drives a mounted Server for its parent (``outer``), the principal of the
    parent's caller whose call this one serves; else the session's ``anonymous`` name."""
    principal = session.principal
    if principal is None and getattr(session, "outer", None) is not None:
        # a mounted Server's session: the walk up the mounts ctx.principal takes
        session = calling_request(session, None)[0]
        principal = session.principal
    return session.anonymous if principal is None else principal


class ServerSession:
    #: who is calling, when the transport knows (an authenticated HTTP request); the policy
    #: layer keys rate limits and audit lines by it (``anonymous`` when None)
    principal: str | None = None
    #: who is calling when nobody is named: "anonymous" (stdio: one client), or per address
    #: (HTTP without auth: ``anonymous@ADDRESS``), so callers do not share one rate budget
    anonymous: str = "anonymous"
    #: the caller's verified mcpkit.auth.AccessToken on an authenticated HTTP server, as its
    #: latest request carried it; each request keeps its own (RequestReceived.access_token)
    access_token: Any = None
    #: the mount (mcpkit.proxy.Upstream) that drives this session in memory for a parent server:
    #: a tool's ``ctx.call_tool`` then goes through the parent's pipeline (``outer.nested``)
    outer: Any = None
    #: whose share of the worker threads this session's sync calls use (server/workers.py): the
    #: transport sets it to the principal, or to the session; None shares an uncapped turn
    worker_key: Any = None
    #: TX-07: what tasks created here are bound to besides the principal: set by transports
    #: whose session lasts across requests (stdio, an HTTP session); None where each request
    #: stands alone (2026-07-28 over HTTP), where the principal alone owns a task
    task_binding: str | None = None

    def __init__(
        self,
        server: Server,
        send: Callable[[list[Outgoing]], None],
        loop: Any = None,
        *,
        inline_sync: bool = False,
        loop_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.server = server
        # asyncio is imported only when something async runs: a server of sync tools on
        # stdio never pays for it (start-up time).
        self._loop = loop
        self._loop_factory = loop_factory
        self.engine = Engine(describe=server.describe, result_meta=server.result_meta)
        self._send = send
        self._lock = threading.RLock()
        #: request id -> the future running it (async handlers and worker-thread calls)
        self._tasks: dict[Any, Any] = {}
        #: ids of sync handlers running inline right now (drain waits for them too)
        self._inline: set[Any] = set()
        self._contexts: dict[Any, Context] = {}
        #: ids of requests the client cancelled whose handlers still run: the engine forgot
        #: them (CN-01), but their Context, future and eventual answer are still keyed by the id
        self._abandoned: set[Any] = set()
        self._waiting: dict[Any, Any] = {}
        self._flush_scheduled = False
        self._idle: threading.Condition | None = None  # made by wait_idle, the only waiter
        #: True: sync handlers run in the thread that fed the request (stdio); False: worker threads
        self.inline_sync = inline_sync
        self.log_level: str | None = None  # None until logging/setLevel: the server default applies
        self.subscriptions: set[str] = set()
        self.closed = False
        #: called when a request finishes, so a transport can resume reading (backpressure)
        self.on_request_done: Callable[[], None] | None = None
        #: called by a handler about to block waiting for the client (the stdio reader hands off)
        self.before_block: Callable[[], None] | None = None
        #: called with the id of a request the client cancelled: no answer goes out for it
        #: (CN-01), so a transport that waits for one (an HTTP POST's stream) must stop waiting.
        #: Called under the lock, after ``send`` was given what was queued before
        self.on_cancelled: Callable[[Any], None] | None = None
        #: the transport's session id (Mcp-Session-Id over HTTP), for telemetry
        self.session_id: str | None = None
        #: request id -> the observer's state of it, while server.observer is set (mcpkit.observe)
        self._observed: dict[Any, Any] = {}

    @property
    def loop(self) -> Any:
        """The event loop async handlers run on (created on first use by stdio)."""
        if self._loop is None:
            if self._loop_factory is not None:
                self._loop = self._loop_factory()
            else:
                import asyncio

                self._loop = asyncio.get_running_loop()
        return self._loop

    @property
    def features(self) -> frozenset[str] | None:
        """LC-05/LC-06: the features this session's InitializeResult declared; the session is
        held to them even if the server gains a feature later (None: not known, use the server's)."""
        return self.engine.declared

    @property
    def revision(self) -> Revision | None:
        return self.engine.revision

    @property
    def in_flight(self) -> int:
        return len(self._tasks) + len(self._inline)

    # ------------------------------------------------------------------ input

    def feed(self, frame: bytes | str, access_token: Any = None) -> None:
        """Process one frame. What it causes is queued; :meth:`flush` sends it.

        Sync handlers of ``inline_sync`` sessions run inside this call. ``access_token``: the
        verified credential the frame arrived with; its requests are judged by it (scopes,
        ``ctx.access_token``). None: the session's :attr:`access_token` when they are used.
        """
        with self._lock:
            events = self.engine.receive(frame)
        if access_token is not None:
            _carry(events, access_token)
        self._dispatch(events)

    def feed_message(self, obj: Any, classified: Any = None, access_token: Any = None) -> None:
        """Like :meth:`feed`, for a transport that decoded the JSON itself (and, for a single
        message, maybe classified it already: ``jsonrpc.classify(obj)``)."""
        with self._lock:
            events = self.engine.receive_message(obj, classified)
        if access_token is not None:
            _carry(events, access_token)
        self._dispatch(events)

    def _dispatch(self, events: list[Any]) -> None:
        for event in events:
            t = type(event)
            if t is RequestReceived:
                if self.server.observer is None:  # telemetry off (the default): nothing to wrap
                    self._handle_request(event)
                else:
                    self._on_request(event)
            elif t is CancelRequested:
                self._on_cancel(event)
            elif t is ResponseReceived:
                self._on_response(event)
            elif t is SessionStarted:
                self.flush()  # the handshake answer goes out before any warm-up work starts
                if self.server.observer is not None:
                    self.server.observer.session_started(self, event.revision.version)
                self.server._session_started(self)
            elif t is NotificationReceived:
                observer = self.server.observer
                if observer is not None:
                    observer.notification(self, event.method, event.params)
                self.server._on_client_notification(self, event.method, event.params)

    def flush(self) -> None:
        with self._lock:
            self._flush_scheduled = False
            if self.engine.outbox and not self.closed:
                self._send(self.engine.take_outbox())

    def _schedule_flush(self) -> None:
        """On the loop thread, coalesce the answers of one loop turn into one write."""
        if self._flush_scheduled:
            return
        self._flush_scheduled = True
        self.loop.call_soon(self.flush)

    def _on_loop_thread(self) -> bool:
        return on_loop_thread(self._loop)

    def _flush_soon(self) -> None:
        if self._on_loop_thread():
            self._schedule_flush()
        else:
            self.flush()

    # ------------------------------------------------------------------ requests

    def _on_request(self, ev: RequestReceived) -> None:
        observer = self.server.observer
        if observer is not None:  # telemetry (mcpkit.observe): off by default, and then free
            state = self._observed[ev.id] = observer.start(self, ev)
            token = observer.enter(state)
            try:
                self._handle_request(ev)
            finally:
                observer.exit(state, token)
            return
        self._handle_request(ev)

    def _answered(self, rid: Any, result: Any, error: McpError | None) -> None:
        """An observed request got its answer (or none: cancelled)."""
        state = self._observed.pop(rid, None)
        if state is not None:
            self.server.observer.end(state, result, error)  # type: ignore[union-attr]

    def _handle_request(self, ev: RequestReceived) -> None:
        rid = ev.id
        if self._abandoned and rid in self._abandoned:
            # BP-04: an id is not reused in a session. One whose cancelled handler still runs
            # would be answered with that handler's result and share its Context (its request,
            # its token): refused until the handler ends
            self._reply_error(rid, McpError(INVALID_REQUEST, f"Request id {clipped(str(rid))} is still used by a "
                                            "cancelled request whose handler has not ended; send a new id."),
                              flush=False)
            return
        handler = self.server._methods.get(ev.method) if ev.method in ev.revision.methods else None
        feature = FEATURE_OF_METHOD.get(ev.method)
        if feature is not None and handler is not None:
            features = self.engine.declared  # inline: a feature this session declared needs no call
            if (features is None or feature not in features or ev.revision.era == "modern") and \
                    not self.serves(feature, ev.revision):
                handler = None  # HM-13, LC-05: a method of a capability not declared is not found
        if handler is None:
            method = clipped(ev.method)
            self._reply_error(rid, McpError(METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method}),
                              flush=False)
            return
        try:
            outcome = handler(self, ev)
        except McpError as exc:
            self._reply_error(rid, exc, flush=False)
            return
        except Exception:  # noqa: BLE001 - a bug in a handler must not take the server down
            self._internal_error(rid, ev.method)
            return
        t = type(outcome)
        if t is dict:
            with self._lock:
                self.engine.respond(rid, outcome)
            if self._observed:
                self._answered(rid, outcome, None)
        elif t is SyncCall:
            self._run_sync(rid, ev.method, outcome.fn)
        elif t is OffloadedCall:
            self._run_sync(rid, ev.method, outcome.fn, True)
        else:
            self._run_async(rid, ev.method, outcome)

    def _run_sync(self, rid: Any, method: str, fn: Callable[[], dict[str, Any]], offload: bool = False) -> None:
        if self.inline_sync and not offload:
            # the hot path of stdio: no lock around the handler, one around its answer
            self._inline.add(rid)  # a set add is atomic; drain reads it under the lock
            try:
                result = fn()
            except Exception as exc:  # noqa: BLE001 - McpError included: _finish maps it
                self._finish(rid, None, exc, method, flush=False)
            else:
                self._finish(rid, result, None, method, flush=False)
            return
        with self._lock:
            self._tasks[rid] = _RUNNING_IN_WORKER
        if self._observed:
            fn = self.server.observer.bind_fn(self._observed.get(rid), fn)  # type: ignore[union-attr]
        if self.outer is not None:
            # a mounted child's sync tool: the parent's call it serves rides into the worker
            fn = partial_run(contextvars.copy_context(), fn)
        self.server.workers.submit(
            fn, lambda result, exc: self._finish(rid, result, exc, method, flush=True), self.worker_key)

    def _run_async(self, rid: Any, method: str, coro: Any) -> None:
        import asyncio

        if self._on_loop_thread():
            fut: Any = self.loop.create_task(coro)
        else:
            if self._observed:  # the task is made on the loop's thread, outside this context
                coro = self.server.observer.bind_coro(self._observed.get(rid), coro)  # type: ignore[union-attr]
            fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        with self._lock:
            self._tasks[rid] = fut
        fut.add_done_callback(lambda f: self._future_done(rid, method, f, flush=True))

    def _future_done(self, rid: Any, method: str, fut: Any, flush: bool) -> None:
        if fut.cancelled():
            self._finish(rid, None, None, method, flush)
            return
        exc = fut.exception()
        self._finish(rid, None if exc is not None else fut.result(), exc, method, flush)

    def _finish(self, rid: Any, result: Any, exc: BaseException | None, method: str, flush: bool) -> None:
        with self._lock:
            self._tasks.pop(rid, None)
            self._inline.discard(rid)
            self._contexts.pop(rid, None)
            if self._abandoned:
                self._abandoned.discard(rid)
            if exc is None:
                if result is not None:
                    try:
                        self.engine.respond(rid, result)
                    except TypeError as bad:  # not JSON: still answer, never leave the client waiting
                        self._internal_error(rid, method, bad)
            elif isinstance(exc, McpError):
                self.engine.respond_error(rid, exc)
            elif not _is_cancelled(exc):
                self._internal_error(rid, method, exc)
            if self._idle is not None and not self._tasks and not self._inline:
                self._idle.notify_all()
        if self._observed:
            self._answered(rid, result if exc is None else None, exc if isinstance(exc, McpError) else
                           None if exc is None or _is_cancelled(exc) else McpError(INTERNAL_ERROR, "Internal error."))
        if flush:
            self._flush_soon()
        if self.on_request_done is not None:
            self.on_request_done()

    def _reply_error(self, rid: Any, exc: McpError, flush: bool) -> None:
        with self._lock:
            self.engine.respond_error(rid, exc)
        if self._observed:
            self._answered(rid, None, exc)
        if flush:
            self._flush_soon()

    def _internal_error(self, rid: Any, method: str, exc: BaseException | None = None) -> None:
        cid = new_correlation_id()
        log.error("internal error in %s (correlation id %s)", method, cid, exc_info=exc or True)
        from .details import describe

        detail = describe(exc) if exc is not None else None  # development only (server/details.py)
        error = McpError(INTERNAL_ERROR, "Internal error." if detail is None else f"Internal error: {detail}.",
                         {"correlationId": cid})
        with self._lock:
            self.engine.respond_error(rid, error)
        if self._observed:
            self._answered(rid, None, error)

    def context(self, req: RequestReceived) -> Context:
        with self._lock:
            ctx = self._contexts.get(req.id)
            if ctx is None:
                ctx = Context(self, req, new_correlation_id())
                self._contexts[req.id] = ctx
            return ctx

    def _on_cancel(self, ev: CancelRequested) -> None:
        # CN-01: the engine already forgot the request, so no response can go out for it.
        log.info("request %r cancelled by the client%s", ev.request_id, f": {ev.reason}" if ev.reason else "")
        with self._lock:
            ctx = self._contexts.get(ev.request_id)
            fut = self._tasks.get(ev.request_id)
            if ctx is not None or fut is not None or ev.request_id in self._inline:
                self._abandoned.add(ev.request_id)
        if ctx is not None:
            ctx.cancelled.set()
        if fut is not None:
            self._cancel_future(fut)
        if self.on_cancelled is not None:
            with self._lock:
                self.flush()  # what the request said before its cancellation goes out first
                self.on_cancelled(ev.request_id)

    # ------------------------------------------------------------------ server -> client

    def _on_response(self, ev: ResponseReceived) -> None:
        with self._lock:
            fut = self._waiting.pop(ev.id, None)
        if fut is None:
            return
        if ev.error is None:
            value: Any = ev.result
            setter = fut.set_result
        else:
            err = ev.error
            value = ClientRequestError(err.get("code", INTERNAL_ERROR), str(err.get("message", "")), err.get("data"))
            setter = fut.set_exception

        def resolve() -> None:
            if not fut.done():
                setter(value)

        if self._on_loop_thread():
            resolve()
        else:
            self.loop.call_soon_threadsafe(resolve)

    async def request_client(
        self, method: str, params: dict[str, Any] | None, *, related: Any = None, timeout: float | None = None
    ) -> Any:
        """Send a request to the client and wait for its answer (LC-10: bounded by a timeout)."""
        import asyncio

        fut = self.loop.create_future()
        with self._lock:
            rid = self.engine.send_request(method, params, related)
            self._waiting[rid] = fut
        self.flush()
        limit = self.server.client_request_timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(fut, limit)
        except TimeoutError:
            raise ClientTimeoutError(f"the client did not answer {method} within {limit} s") from None
        finally:
            with self._lock:
                abandoned = self._waiting.pop(rid, None) is not None
                if abandoned:
                    # timed out or the handler was cancelled: tell the client to stop (LC-10, CN-02)
                    self.engine.abandon_request(rid, "no longer needed")
            if abandoned:
                self.flush()

    # ------------------------------------------------------------------ notifications

    def send_progress(self, rid: Any, progress: float, total: float | None, message: str | None) -> None:
        try:
            with self._lock:
                sent = self.engine.progress(rid, progress, total, message)
        except ValueError as exc:
            log.warning("progress not sent: %s", exc)
            return
        if sent:
            self._flush_soon()

    def send_log(
        self, level: str, data: Any, logger: str | None, related: Any = None, threshold: str | None = None
    ) -> None:
        """``threshold``: a request's own level (2026-07-28); else the session's setLevel (LG-02)."""
        threshold = threshold or self.log_level or self.server.log_level
        if level_rank(level) < level_rank(threshold):
            return
        policy = self.server._policy
        if policy is not None and policy.redact_logs:
            data = policy.layer.redact(data)  # LG-05: no credentials in log messages
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        with self._lock:
            if related is not None and not self.engine.is_in_flight(related):
                related = None
            sent = self.engine.notify("notifications/message", params, related)
        if sent:
            self._flush_soon()

    def notify_request(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> None:
        """A notification that belongs to a request still in flight (a listen stream), from any thread."""
        if self.closed:
            return
        with self._lock:
            sent = self.engine.notify(method, params, related=request_id)
        if sent:
            self._flush_soon()

    def serves(self, feature: str, rev: Any) -> bool:
        """Whether this session may use ``feature`` (a capability name) under ``rev``."""
        if feature == "completions" and not rev.completions_capability:
            return True  # CP-01: 2024-11-05 has no flag; the method exists
        if rev.era == "modern" or self.features is None:
            return self.server.has_feature(feature)
        return feature in self.features

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """A session-wide notification (list_changed, resources/updated), from any thread."""
        if self.closed:
            return
        with self._lock:
            sent = self.engine.revision is not None and self.engine.notify(method, params)
        if sent:
            self._flush_soon()

    # ------------------------------------------------------------------ shutdown

    def wait_idle(self, timeout: float) -> bool:
        """Block (not on the loop thread) until no request is in flight; False on timeout."""
        with self._lock:
            if self._idle is None:
                self._idle = threading.Condition(self._lock)
            return self._idle.wait_for(lambda: not self._tasks and not self._inline, timeout)

    def end_listens(self) -> None:
        """SB-05: the server ends this session's listen streams with a result, then stops them."""
        from .listen import SUBSCRIPTION_ID_KEY

        for listener in [x for x in list(self.server._listeners) if x.session is self]:
            with self._lock:
                self.engine.respond(listener.request_id, {"_meta": {SUBSCRIPTION_ID_KEY: listener.request_id}})
                fut = self._tasks.get(listener.request_id)
            if fut is not None:
                self._cancel_future(fut)
        self.flush()

    def abandon_client_requests(self, reason: str) -> None:
        """The client is gone: requests we sent it will never be answered; fail them now."""
        with self._lock:
            waiting = list(self._waiting.items())
            self._waiting.clear()
        for _rid, fut in waiting:
            error = ClientRequestError(-32000, reason)

            def fail(fut: Any = fut, error: Exception = error) -> None:
                if not fut.done():
                    fut.set_exception(error)

            fut.get_loop().call_soon_threadsafe(fail)

    def fail_in_flight(self, error: McpError) -> None:
        """A shutdown past its deadline: every request still running is answered with ``error``
        now and its handler cancelled (what the handler returns later is dropped). Listen
        streams are ended first, with their result (SB-05)."""
        self.end_listens()
        with self._lock:
            for rid in [*self._tasks, *self._inline]:
                if rid not in self._abandoned:  # cancelled by the client: never answered (CN-01)
                    self.engine.respond_error(rid, error)
        self.cancel_all()
        self.flush()

    def cancel_all(self) -> None:
        with self._lock:
            futures = list(self._tasks.values())
            waiting = list(self._waiting.values())
        for fut in futures:
            self._cancel_future(fut)
        for w in waiting:
            self.loop.call_soon_threadsafe(w.cancel)

    def _cancel_future(self, fut: Any) -> None:
        # an asyncio future must be cancelled on its loop; concurrent futures anywhere
        if hasattr(fut, "get_loop") and not self._on_loop_thread():
            fut.get_loop().call_soon_threadsafe(fut.cancel)
        else:
            fut.cancel()

    def close(self) -> None:
        self.cancel_all()
        with self._lock:
            self.closed = True
        observer = self.server.observer
        if observer is not None:
            observer.session_closed(self)
        self.server._session_closed(self)
