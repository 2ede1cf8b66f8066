"""Tools as tasks (TX-01..TX-05): a tools/call answered with CreateTaskResult while the tool runs.

The pipeline of the call becomes the task (``run_as_task``: its answer settles the task, so every
step, the policy's included, holds for a task as for a call), or, on the plain path, the handler
is started in the background (``start_task``, ``task_after_input`` when the tool asks for input
first). server/pipes.py and server/terminals.py start them; they are here so that each module
stays one concept.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from ..protocol.engine import RequestReceived
from ..stores.errors import StoreUnavailable
from .context import Context
from .pipeline import CallContext, Pipe
from .session import OffloadedCall, _is_cancelled
from .terminals import run_async, run_sync
from .tools import Tool

if TYPE_CHECKING:
    from .session import ServerSession

__all__ = ["Announcement", "announce_task", "run_as_task", "start_task", "task_after_input"]


def announce_task(cc: CallContext, ctx: Context | None, handler: Callable[..., Any]) -> Callable[..., Any]:
    """TX-03: the task is stored, then the call is answered with its CreateTaskResult (TX-02);
    the handler runs on, here, in this pipeline, whose answer settles the task (run_as_task).
    Returns what run_tool runs as the handler: ``handler`` once the task is announced; on the
    event loop with a store that may wait on the network, a handler that announces it first,
    so the task is stored off the loop (create_async, or on the worker a sync handler runs on)."""
    manager = cc.session.server.tasks
    if not manager.offloaded():
        _announce(cc, ctx, manager, _created(manager, cc.session))
        return handler
    runner = cc.runner
    if runner is not None:  # another process runs the handler (isolation): the task is stored first

        async def run_announced(*args: Any) -> Any:
            _announce(cc, ctx, manager, await manager.create_async(cc.session))
            out = runner(*args)
            return await out if inspect.isawaitable(out) else out

        cc.runner = run_announced
        return handler
    if cc.target.is_async:

        async def announced(*args: Any, **kwargs: Any) -> Any:
            _announce(cc, ctx, manager, await manager.create_async(cc.session))
            return await handler(*args, **kwargs)

        return announced

    def announced_on_worker(*args: Any, **kwargs: Any) -> Any:  # in_worker: off the loop already
        _announce(cc, ctx, manager, _created(manager, cc.session))
        return handler(*args, **kwargs)

    return announced_on_worker


def _created(manager: Any, session: Any) -> Any:
    """manager.create; the retryable E_NOT_CONNECTED error while the task store is down."""
    from .tasks import store_down

    try:
        return manager.create(session)
    except StoreUnavailable as exc:
        raise store_down("tools/call", exc) from None


def _announce(cc: CallContext, ctx: Context | None, manager: Any, record: Any) -> None:
    if ctx is not None:
        ctx._task = (manager, record)
        ctx.cancelled = record.cancel_event
    _answer_with_task(cc, manager, record)


def _answer_with_task(cc: CallContext, manager: Any, record: Any) -> None:
    session, rid = cc.session, cc.request.id
    import asyncio
    import concurrent.futures

    with session._lock:
        running = session._tasks.get(rid)
    if not isinstance(running, (asyncio.Future, concurrent.futures.Future)):
        try:
            running = asyncio.current_task()  # an async pipeline, on the session's loop
        except RuntimeError:
            running = None  # a sync one on a worker: tasks/cancel sets ctx.cancelled only
    if running is not None:
        with manager._lock:
            record.future, record.loop = running, session._loop  # tasks/cancel stops the pipeline
    cc.task = (manager, record)
    session._finish(rid, record.created(), None, "tools/call", flush=True)


class Announcement:
    """``ctx.start_task()`` of a ``task_after_input`` tool under the pipeline: the call is
    answered with the task, and the pipeline goes on as the task."""

    __slots__ = ("cc", "_done")

    def __init__(self, cc: CallContext) -> None:
        self.cc = cc
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, created: Any) -> None:
        self._done = True
        manager, record = self.cc.handler_context._task
        self.cc.task = (manager, record)
        self.cc.session._finish(self.cc.request.id, created, None, "tools/call", flush=True)


def run_as_task(pipe: Pipe, cc: CallContext) -> Any:
    """A tools/call that may become a task (TX-01) takes its whole pipeline (refusals, limits,
    middleware, timeout, the handler, shaping, the audit line). Until the task is announced
    (run_tool) it is an ordinary call: a refusal or an input round answers it. Once announced,
    the call was answered with the CreateTaskResult and what the pipeline answers in the end
    settles the task (TX-05): a task's result is limited, sanitized and audited as any call's.
    A sync pipeline runs on a worker thread, never on a transport's reader (TX-04: its input
    comes by later requests)."""
    cc.announce = True
    if pipe.is_async:
        return _as_task_async(pipe.run, cc)
    return OffloadedCall(partial(_as_task_sync, pipe.run, cc))


def _as_task_sync(run: Callable[[CallContext], Any], cc: CallContext) -> Any:
    try:
        result = run(cc)
    except BaseException as exc:
        if cc.task is None:
            raise
        _task_ended(cc.task, None, exc)
        return None
    if cc.task is None:
        return result
    _task_ended(cc.task, result, None)
    return None  # the request was answered with the task


async def _as_task_async(run: Callable[[CallContext], Any], cc: CallContext) -> Any:
    try:
        result = run(cc)
        if inspect.isawaitable(result):
            result = await result
    except BaseException as exc:
        if cc.task is None:
            raise
        _task_ended(cc.task, None, exc)
        if not isinstance(exc, Exception):
            raise
        return None
    if cc.task is None:
        return result
    _task_ended(cc.task, result, None)
    return None


def _task_ended(task: Any, result: Any, exc: BaseException | None) -> None:
    """The pipeline of a task's call answered: that answer is the task's outcome."""
    manager, record = task
    if exc is not None:
        if _is_cancelled(exc):
            manager.cancel(record)
        else:
            manager.settle(record, None, exc)  # a JSON-RPC error fails the task (TX-05)
    elif result is None:  # a deadline settled it already, or it was cancelled
        if not record.terminal:
            manager.cancel(record)
    else:
        manager.settle(record, result, None)


def start_task(
    session: ServerSession, req: RequestReceived, tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any],
    cid: str | None, ctx: Context | None,
) -> dict[str, Any]:
    """Store the task (TX-03), start the handler in the background, answer CreateTaskResult (TX-02).
    On the event loop with a store that may wait on the network, a coroutine that does it: the
    task is stored off the loop (the session awaits what call_tool returns)."""
    manager = session.server.tasks
    if manager.offloaded():
        return _started(session, req, tool, args, kwargs, cid, ctx, manager)  # type: ignore[return-value]
    return _start_run(session, req, tool, args, kwargs, cid, ctx, manager, _created(manager, session))


async def _started(
    session: ServerSession, req: RequestReceived, tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any],
    cid: str | None, ctx: Context | None, manager: Any,
) -> dict[str, Any]:
    record = await manager.create_async(session)
    return _start_run(session, req, tool, args, kwargs, cid, ctx, manager, record)


def _start_run(
    session: ServerSession, req: RequestReceived, tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any],
    cid: str | None, ctx: Context | None, manager: Any, record: Any,
) -> dict[str, Any]:
    rev = req.revision
    if ctx is not None:
        session._contexts.pop(req.id, None)  # the request is answered now; the task owns the context
        ctx._task = (manager, record)
        ctx.cancelled = record.cancel_event
    if tool.is_async:
        import asyncio

        async def run() -> None:
            try:
                result = await run_async(tool, args, kwargs, rev, cid, ctx)
            except asyncio.CancelledError:
                manager.cancel(record)
                raise
            except BaseException as exc:  # noqa: BLE001 - McpError: failed (TX-05)
                manager.settle(record, None, exc)
                return
            manager.settle(record, result, None)

        loop = session.loop
        with manager._lock:
            if session._on_loop_thread():
                record.future = loop.create_task(run())
            else:
                record.future = asyncio.run_coroutine_threadsafe(run(), loop)
            record.loop = loop
    else:

        def done(result: Any, exc: BaseException | None) -> None:
            if exc is not None and _is_cancelled(exc):
                manager.cancel(record)
            else:
                manager.settle(record, result, exc)

        session.server.workers.submit(lambda: run_sync(tool, args, kwargs, rev, cid, ctx), done)
    return record.created()


def task_after_input(
    session: ServerSession, req: RequestReceived, tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any],
    cid: str | None, ctx: Context,
) -> Any:
    """TX-03: the inputs asked before ``ctx.start_task()`` are MRTR rounds answered synchronously;
    the call is answered with the CreateTaskResult when the handler starts its task, or with the
    handler's own answer (InputRequiredResult, result) when it ends first."""
    import asyncio

    rev = req.revision

    async def run() -> Any:
        try:
            result = await run_async(tool, args, kwargs, rev, cid, ctx)
        except asyncio.CancelledError:
            if ctx._task is not None:
                ctx._task[0].cancel(ctx._task[1])
            raise
        except BaseException as exc:  # noqa: BLE001
            if ctx._task is None:
                raise
            ctx._task[0].settle(ctx._task[1], None, exc)
            return None
        if ctx._task is None:
            return result
        ctx._task[0].settle(ctx._task[1], result, None)
        return None

    async def answer() -> Any:
        loop = asyncio.get_running_loop()
        ctx._announce = loop.create_future()
        handler = loop.create_task(run())
        try:
            await asyncio.wait({handler, ctx._announce}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if ctx._task is None:  # the request was cancelled before any task existed
                handler.cancel()
            raise
        if ctx._announce.done():
            session._contexts.pop(req.id, None)
            return ctx._announce.result()
        return handler.result()

    return answer()
