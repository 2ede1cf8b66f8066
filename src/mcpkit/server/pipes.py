"""Each item's pipe: its steps chained to its handler, built once and run on every route.

pipeline.py says what a step is and how steps chain; terminals.py runs the handler at the end of
the chain. Here an item's steps (pipeline.steps_for) are chained to its kind's terminal
(:func:`build_pipe`), the pipe is kept on the server until the policy, the middleware or the
registry changes (:func:`kept_pipe`, :func:`pipe_of`), and run for each route:

- a request from the client: dispatch.py reads it, finds the item and its pipe and asks
  ``pipe.serve(session, request, item, name, arguments)``, which answers at once, or with a
  coroutine or a SyncCall for the session to run (:func:`start`); a tool's call may become a
  task (tool_tasks.run_as_task runs the whole pipe as the task, TX-01);
- a request for nothing registered: :func:`serve_missing`, a pipe of its own under a policy or
  middleware, so the refusal is audited and seen by middleware;
- a tool called from inside another (``ctx.call_tool``): :func:`run_nested`;
- a subscription of a listen stream and tool search's own listing: ``pipe_of(...).run(cc)``.

So a rule enforced by a step holds on every route (TL-11), and an item no step applies to takes
its kind's plain path (terminals.plain_call for a tool), as if there were no pipeline.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from ..protocol.errors import E_UNSUPPORTED, ToolError
from .pipeline import CallContext, Pipe, any_async, chain, steps_for, waits_on_store
from .session import SyncCall
from .tasks import wants_tasks
from .terminals import TERMINALS, TOOL_OUTCOME, Unknown, missing, plain_call, refuse_missing, run_tool, settled

if TYPE_CHECKING:
    from ..protocol.engine import RequestReceived
    from .context import Context
    from .session import ServerSession
    from .tools import Tool

__all__ = ["build_pipe", "kept_pipe", "pipe_of", "run_nested", "serve_missing", "start"]


def pipe_of(server: Any, kind: str, item: Any) -> Pipe:
    """The kept pipe of ``item`` for ``kind``, built on first use."""
    if kind == "call_tool":
        return server._tool_pipes.get(item) or kept_pipe(server, kind, item)  # type: ignore[no-any-return]
    return server._pipes.get((kind, item)) or kept_pipe(server, kind, item)  # type: ignore[no-any-return]


def kept_pipe(server: Any, kind: str, item: Any) -> Pipe:
    """Build the pipe of ``item`` and keep it in the cache current when the build began: a change
    meanwhile (policy, middleware, a step) replaced that cache, so the pipe is built again."""
    for _ in range(3):  # a change per build, three times over: this call takes the last one
        pipes = server._tool_pipes if kind == "call_tool" else server._pipes
        pipe = build_pipe(server, kind, item)
        pipes[item if kind == "call_tool" else (kind, item)] = pipe
        if pipes is (server._tool_pipes if kind == "call_tool" else server._pipes):
            break
    return pipe


def build_pipe(server: Any, kind: str, item: Any) -> Pipe:
    """Choose and chain the steps of ``item`` for ``kind`` (once, until something changes)."""
    steps = steps_for(server, kind, item)
    unknown = isinstance(item, Unknown)
    if kind == "call_tool":
        if not any(getattr(s, "outcome", False) for s in steps):
            steps.insert(0, TOOL_OUTCOME)
        plain = len(steps) == 1 and steps[0] is TOOL_OUTCOME
        actions = getattr(item, "actions", None)
        handler_async = bool(getattr(item, "is_async", False)) or (
            actions is not None and any(a.is_async for a in actions.values()))
        run_handler: Callable[..., Any] = refuse_missing if unknown else run_tool
    else:
        plain = not steps
        handler_async = _handler_async(server, kind, item)
        run_handler = refuse_missing if unknown else TERMINALS[kind]
    is_async = handler_async or any_async(steps, kind) or waits_on_store(steps, server)
    if kind == "call_tool":
        terminal: Callable[[CallContext], Any] = partial(run_handler, is_async=is_async)
    else:
        terminal = partial(run_handler, mode="async" if is_async else "sync")
    pipe = Pipe(chain(steps, kind, terminal, is_async, server), is_async, plain, steps)
    # what a request from the client runs (dispatch.py): the plain path where no step applies;
    # an unknown tool is always refused in its pipe (a nested call's refusal is the same)
    if kind == "call_tool":
        pipe.serve = plain_call if plain and not unknown else partial(_serve_tool, pipe)
    elif plain:
        pipe.serve = partial(_serve_plain, run_handler, kind)
    else:
        pipe.serve = partial(_serve_steps, pipe, kind)
    return pipe


def _handler_async(server: Any, kind: str, item: Any) -> bool:
    if kind in ("read_resource", "get_prompt"):
        return bool(item.is_async)
    if kind == "complete":
        completers = list((getattr(item, "completions", None) or {}).values())
        if server._completer is not None:
            completers.append(server._completer)
        return any(c.is_async for c in completers)
    return False


# ---------------------------------------------------------------------- a request from the client


def _serve_tool(pipe: Pipe, session: ServerSession, req: RequestReceived, tool: Tool, name: str,
                arguments: Any) -> Any:
    cc = CallContext(session, req, "call_tool", tool, name, arguments)
    if tool.task is not None and req.revision.era == "modern" and wants_tasks(req.capabilities):
        from .tool_tasks import run_as_task  # a task tool only: the plain path imports nothing

        return run_as_task(pipe, cc)  # TX-01: the whole pipeline runs as the task (TL-11)
    return start(pipe, cc)


def _serve_steps(pipe: Pipe, kind: str, session: ServerSession, req: RequestReceived, item: Any, name: str | None,
                 arguments: Any) -> Any:
    return start(pipe, CallContext(session, req, kind, item, name, arguments))


def _serve_plain(terminal: Callable[[CallContext, str], Any], kind: str, session: ServerSession,
                 req: RequestReceived, item: Any, name: str | None, arguments: Any) -> Any:
    return terminal(CallContext(session, req, kind, item, name, arguments), mode="outer")


def serve_missing(session: ServerSession, req: RequestReceived, kind: str, name: str, arguments: Any) -> Any:
    """A call, read or prompt of nothing registered: refused at once, or under a policy or
    middleware in a pipe of its own (not kept: the names are the caller's), so the refusal is
    audited and seen by middleware like a request for an item that exists."""
    server = session.server
    if server._policy is None and not server._middleware:
        raise missing(server, req, kind, name)
    unknown = Unknown(name)
    return build_pipe(server, kind, unknown).serve(session, req, unknown, name, arguments)


def start(pipe: Pipe, cc: CallContext) -> Any:
    """The session's way to run a pipe: a coroutine, or a SyncCall run where sync handlers run
    (inline on the stdio reader thread, or on a worker)."""
    if pipe.is_async:
        return _awaited(pipe.run, cc)
    return SyncCall(partial(pipe.run, cc))


async def _awaited(run: Callable[[CallContext], Any], cc: CallContext) -> Any:
    out = run(cc)
    if inspect.isawaitable(out):
        return await out
    return out


# ---------------------------------------------------------------------- a tool called from a tool


def run_nested(ctx: Context, tool: Tool | None, name: str, arguments: Any, *, want_async: bool) -> Any:
    """``ctx.call_tool`` of ``tool`` (None: nothing of that name, refused as an unknown tool)
    through the same pipe as a call from the client (scopes, gates, limits, middleware, audit);
    a refusal is its result. ``want_async``: an awaitable of the result, else the result."""
    session = ctx._session
    server = session.server
    if tool is None:
        item: Any = Unknown(name)
        pipe = build_pipe(server, "call_tool", item)
    else:
        item = tool
        pipe = server._tool_pipes.get(tool) or kept_pipe(server, "call_tool", tool)
    cc = CallContext(session, ctx._request, "call_tool", item, name, arguments, nested=True,
                     parent=ctx.correlation_id)
    cc.outer_context = ctx
    outcome = pipe.run(cc)
    awaitable = inspect.isawaitable(outcome)
    if want_async:
        return outcome if awaitable else settled(outcome)
    if awaitable:
        # stdio starts its loop with the first async handler: a sync tool's nested call may be the
        # first thing to need it (an async callee, or a rate limit in a shared store)
        loop = session.loop if session._loop is None and session._loop_factory is not None else session._loop
        if loop is not None and not session._on_loop_thread():
            # the callee's pipeline is async (an async handler or hook) and this sync tool runs on
            # a thread of its own: wait for it on the session's loop
            import asyncio

            return asyncio.run_coroutine_threadsafe(_settle_awaitable(outcome), loop).result()
        if inspect.iscoroutine(outcome):
            outcome.close()
        raise ToolError(f"Tool {name!r} is async: await ctx.call_tool_async(...) from an async tool.",
                        code=E_UNSUPPORTED)
    return outcome


async def _settle_awaitable(awaitable: Any) -> Any:
    return await awaitable
