"""Method -> handler table for the handshake era.

Each handler takes ``(session, request)`` (a RequestReceived: id, method, params, and the
revision and client capabilities it is served under) and returns a result dict
(answered at once) or an awaitable (a task or a worker-thread future) whose
result is the result dict. Errors are McpError with the revision's code.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from ..protocol.errors import (
    E_NOT_FOUND,
    E_SCHEMA_VALIDATION,
    E_UNSUPPORTED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    McpError,
    PromptNotFound,
    ResourceNotFound,
    ToolError,
    clipped,
    handler_error,
)
from ..protocol.engine import RequestReceived
from ..protocol.revisions import Revision
from ..protocol.revisions import LOG_LEVELS, SUPPORTED_VERSIONS
from .context import ClientCapabilityError, ClientRequestError, ClientTimeoutError, Context
from .prompts import messages_from
from .resources import contents_from
from .tools import OutputSchemaError, Tool, shape_for_revision
from .listen import listen
from .pipeline import CORRELATION_ID, ERROR_META_KEY, CallContext, CallNext, Pipe, any_async, chain, in_worker, steps_for
from .rounds import InputRequired
from .session import SyncCall, new_correlation_id
from .skills import missing_scopes
from .tasks import TASK_METHODS, missing_extension, wants_tasks
from .validation import format_errors

if TYPE_CHECKING:
    from .session import ServerSession

__all__ = ["METHODS", "build_pipe", "call_nested"]

log = logging.getLogger("mcpkit")

Handler = Callable[["ServerSession", RequestReceived], Any]


def _str_param(params: dict[str, Any], key: str, method: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise McpError(INVALID_PARAMS, f"{method} needs a string {key!r} parameter.")
    return value


# ---------------------------------------------------------------------- tools


def _tool_failure(tool: Tool, exc: BaseException, correlation_id: str | None) -> dict[str, Any]:
    """TL-10: a tool's failure is a result with isError; internals stay in the log."""
    if isinstance(exc, ToolError):
        # what the tool said, its fix and its code, as a step's refusal and a policy's failure
        # say them (docs/policy.md): with or without middleware, the client sees the same result
        text = exc.message or f"Tool {tool.name!r} failed."
        if exc.suggested_fix:
            text += f" Fix: {exc.suggested_fix}"
        return {"content": [{"type": "text", "text": text}], "isError": True,
                "_meta": {ERROR_META_KEY: exc.to_error()}}
    correlation_id = correlation_id or new_correlation_id()
    if isinstance(exc, (ClientCapabilityError, ClientRequestError, ClientTimeoutError)):
        message = str(exc)
    elif isinstance(exc, OutputSchemaError):
        log.error("tool %r: %s (correlation id %s)", tool.name, exc, correlation_id)
        message = f"Tool {tool.name!r} produced output that does not match its outputSchema (correlation id {correlation_id})."
    else:
        log.error("tool %r raised (correlation id %s)", tool.name, correlation_id, exc_info=exc)
        message = f"Internal error while running tool {tool.name!r} (correlation id {correlation_id})."
        from .details import describe

        detail = describe(exc)  # development only (server/details.py)
        if detail is not None:
            message += f" {detail}"
    return {"content": [{"type": "text", "text": message}], "isError": True}


def _finish(tool: Tool, value: Any, rev: Revision) -> dict[str, Any]:
    result = tool.to_result(value)
    if rev.downgrades:
        result = shape_for_revision(result, rev)
    return result


def _run_sync(
    tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any], rev: Revision, cid: str | None, ctx: Context | None
) -> dict[str, Any]:
    try:
        return _finish(tool, tool.handler(*args, **kwargs), rev)
    except McpError:
        raise
    except InputRequired:
        return ctx.rounds().result()  # type: ignore[union-attr]
    except Exception as exc:  # noqa: BLE001
        return _tool_failure(tool, exc, cid)


async def _run_async(
    tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any], rev: Revision, cid: str | None, ctx: Context | None
) -> dict[str, Any]:
    try:
        return _finish(tool, await tool.handler(*args, **kwargs), rev)
    except McpError:
        raise
    except InputRequired:
        return ctx.rounds().result()  # type: ignore[union-attr]
    except Exception as exc:  # noqa: BLE001
        return _tool_failure(tool, exc, cid)


def call_tool(session: ServerSession, req: RequestReceived) -> Any:
    server = session.server
    params = req.params or {}
    name = params.get("name")
    if type(name) is not str:
        name = _str_param(params, "name", "tools/call")  # a str subclass passes; anything else is refused
    tool = server._tools.get(name)
    if server._host_schemas is not None:  # the host's name and nulls, read back (mcpkit/hostschemas.py)
        tool, name, params = server.host_call(req.client_info, tool, name, params)
    if tool is None:
        if server._policy is None and not server._middleware:
            name = clipped(name)
            raise McpError(INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})  # TL-10
        # refused in the pipeline, as a nested call of it is: audited, seen by middleware
        unknown = _Unknown(name)
        pipe = build_pipe(server, "call_tool", unknown)
        return _start(pipe, CallContext(session, req, "call_tool", unknown, name, params.get("arguments")))
    pipe = server._tool_pipes.get(tool)
    if pipe is None:
        pipe = kept_pipe(server, "call_tool", tool)
    if not pipe.plain:
        cc = CallContext(session, req, "call_tool", tool, name, params.get("arguments"))
        if tool.task is not None and req.revision.era == "modern" and wants_tasks(req.capabilities):
            from .tool_tasks import run_as_task  # a task tool only: the plain path imports nothing

            return run_as_task(pipe, cc)  # TX-01: the whole pipeline runs as the task (TL-11)
        return _start(pipe, cc)
    # the plain fast path: no step applies to this tool (no policy, scope or middleware)
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    rev = req.revision
    valid, errors = tool.check_arguments(arguments)
    if errors is not None:
        message = f"Invalid arguments for tool {name!r}: {format_errors(errors)}"
        if rev.invalid_arguments_as_tool_error:  # TL-10 (SEP-1303, 2025-11-25+)
            return {"content": [{"type": "text", "text": message}], "isError": True}
        raise McpError(INVALID_PARAMS, message, {"errors": errors})
    as_task = False
    if tool.task is not None and rev.era == "modern":  # the tasks extension (TX-01)
        as_task = wants_tasks(req.capabilities)
        if not as_task and tool.task == "required":
            raise missing_extension(f"Tool {name!r}")
    ctx: Context | None = None
    if tool.context_param is not None:
        ctx = session.context(req)
        ctx._names = tool.call_names
        if rev.era == "modern":
            ctx.rounds()  # a tampered requestState is refused before the tool runs (MR-06)
        cid: str | None = ctx.correlation_id
    else:
        cid = None  # minted only if something goes wrong: the hot path stays cheap
    try:
        args, kwargs = tool.call_args(valid, ctx)  # type: ignore[arg-type]
    except (ToolError, OSError) as exc:  # a checking parameter type refused the value (a confined path)
        return _tool_failure(tool, exc, cid)
    except (TypeError, ValueError) as exc:  # the binder could not build the Python values
        message = f"Invalid arguments for tool {name!r}: {exc}"
        if rev.invalid_arguments_as_tool_error:
            return {"content": [{"type": "text", "text": message}], "isError": True}
        raise McpError(INVALID_PARAMS, message) from None
    if as_task:
        from .tool_tasks import start_task, task_after_input

        if tool.task_after_input:
            return task_after_input(session, req, tool, args, kwargs, cid, ctx)  # type: ignore[arg-type]
        return start_task(session, req, tool, args, kwargs, cid, ctx)
    if tool.is_async:
        return _run_async(tool, args, kwargs, rev, cid, ctx)
    return SyncCall(lambda: _run_sync(tool, args, kwargs, rev, cid, ctx))


def call_nested(ctx: Context, name: str, arguments: Any, *, want_async: bool) -> Any:
    """``ctx.call_tool``: a tool called from inside another takes the same pipeline as a call
    from the client (scopes, gates, limits, middleware, audit); a refusal is its result."""
    session, req = ctx._session, ctx._request
    if not isinstance(name, str):
        # a name a batch tool passed on from its caller may be anything: it names no tool, and
        # is refused as an unknown one (audited, a result with isError), not a TypeError
        name = clipped(repr(name))
    if ctx._names is not None:
        # a tool copied by include calls its child's tools by the child's names: here they
        # are the prefixed copies
        name = ctx._names(name)
    search = session.server._tool_search
    inner = search.named(arguments) if search is not None and name == search.call_name else None
    if inner is not None:  # the call tool of tool search, called from a tool: the tool it names
        name, arguments = inner["name"], inner["arguments"]
    outer = session.outer
    if outer is not None:
        # a mounted child's tool calling another: it takes the parent's pipeline under the
        # parent's name (gates, scopes, tool policy, rate limits, middleware, audit), then the
        # child's own as the call is forwarded, as a call from the client would
        return outer.nested(ctx, name, arguments, want_async)
    server = session.server
    tool = server._tools.get(name)
    if tool is None:
        unknown = _Unknown(name)
        pipe = build_pipe(server, "call_tool", unknown)
        cc = CallContext(session, req, "call_tool", unknown, name, arguments, nested=True, parent=ctx.correlation_id)
    else:
        pipe = server._tool_pipes.get(tool)
        if pipe is None:
            pipe = kept_pipe(server, "call_tool", tool)
        cc = CallContext(session, req, "call_tool", tool, name, arguments, nested=True, parent=ctx.correlation_id)
    cc.outer_context = ctx
    outcome = pipe.run(cc)
    awaitable = inspect.isawaitable(outcome)
    if want_async:
        return outcome if awaitable else _settled(outcome)
    if awaitable:
        if session._loop is not None and not session._on_loop_thread():
            # the callee's pipeline is async (an async handler or hook) and this sync tool runs on
            # a thread of its own: wait for it on the session's loop
            import asyncio

            return asyncio.run_coroutine_threadsafe(_settle_awaitable(outcome), session._loop).result()
        if inspect.iscoroutine(outcome):
            outcome.close()
        raise ToolError(f"Tool {name!r} is async: await ctx.call_tool_async(...) from an async tool.",
                        code=E_UNSUPPORTED)
    return outcome


async def _settled(value: Any) -> Any:
    return value


async def _settle_awaitable(awaitable: Any) -> Any:
    return await awaitable


class _Unknown:
    """Stands in for a tool, resource or prompt that does not exist, so under a policy or
    middleware its refusal takes the pipeline (and is audited) like a request for one that does."""

    actions = None
    options = None
    annotations = None
    resolved = None
    scopes = ()
    is_async = False
    context_param = None
    task = None
    handler = None
    uri = None
    template = None

    def __init__(self, name: str) -> None:
        self.name = name


def _missing(server: Any, req: RequestReceived, kind: str, name: str) -> McpError:
    """The refusal of a read or prompt of nothing registered."""
    if kind == "read_resource":
        return server.not_found(name, req.revision)  # RS-08
    name = clipped(name)
    return McpError(INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})  # PM-05


def _raise_missing(cc: CallContext, mode: str) -> Any:
    raise _missing(cc.session.server, cc.request, cc.kind, cc.name)


def _start(pipe: Pipe, cc: CallContext) -> Any:
    """The session's way to run a pipeline: a coroutine, or a SyncCall run where sync handlers
    run (inline on the stdio reader thread, or on a worker)."""
    if pipe.is_async:
        return _awaited(pipe.run, cc)
    return SyncCall(partial(pipe.run, cc))


async def _awaited(run: Callable[[CallContext], Any], cc: CallContext) -> Any:
    out = run(cc)
    if inspect.isawaitable(out):
        return await out
    return out


# ---------------------------------------------------------------------- tools as tasks (TX-01..TX-05)


def run_tool(cc: CallContext, is_async: bool) -> Any:
    """The last step of a tool call's pipeline: validate, bind, run the handler, shape.

    This is the one place where a tool's handler runs under the pipeline. Failures are
    raised for the outermost step to answer (and audit); a sync chain returns the result,
    an async one an awaitable. ``cc.target`` is what runs: the tool, or a manager's action.
    """
    session, req, tool = cc.session, cc.request, cc.item
    rev = req.revision
    arguments = cc.arguments
    valid, errors = tool.check_arguments({} if arguments is None else arguments)
    if errors is not None:
        message = f"Invalid arguments for tool {tool.name!r}: {format_errors(errors)}"
        if not rev.invalid_arguments_as_tool_error and not cc.nested:
            raise McpError(INVALID_PARAMS, message, {"errors": errors})  # TL-10: before 2025-11-25
        raise ToolError(message, code=E_SCHEMA_VALIDATION, details={"errors": errors},
                        suggested_fix="Call again with arguments that match the tool's inputSchema.")
    target = cc.target
    as_task = False
    if target is tool and tool.task is not None and rev.era == "modern" and not cc.nested:
        as_task = wants_tasks(req.capabilities)  # TX-01
        if not as_task and tool.task == "required":
            raise missing_extension(f"Tool {tool.name!r}")
    ctx: Context | None = None
    if target.context_param is not None:
        if cc.nested:
            ctx = Context(session, req, cc.correlation_id)
            if cc.outer_context is not None:
                ctx.cancelled = cc.outer_context.cancelled
        else:
            ctx = session.context(req)
            ctx.correlation_id = cc.correlation_id
            if rev.era == "modern":
                ctx.rounds()  # a tampered requestState is refused before the tool runs (MR-06)
        ctx._names = tool.call_names
        ctx._report = cc.report
        cc.handler_context = ctx
    try:
        args, kwargs = target.call_args(valid, ctx)
    except ToolError:
        raise
    except (TypeError, ValueError) as exc:  # BindError included: the values could not be built
        raise ToolError(f"Invalid arguments for tool {tool.name!r}: {exc}", code=E_SCHEMA_VALIDATION) from None
    handler = target.handler
    if as_task:
        announce = cc.announce
        if not announce:  # not started by run_as_task: cannot happen from a tools/call
            raise McpError(INTERNAL_ERROR, f"Tool {tool.name!r} cannot run as a task on this route.")
        cc.state["task"] = True
        from .tool_tasks import Announcement, announce_task

        if tool.task_after_input:
            ctx._announce = Announcement(cc)  # type: ignore[union-attr]  # ctx.start_task() announces
        else:
            handler = announce_task(cc, ctx, handler)  # or what stores the task off the loop first
    cc.ran = True
    # The one place a tool's handler is started under the pipeline (the direct request, a
    # nested call, a manager's action): how it runs (inline, a worker thread, the loop) is
    # decided here, so another way to run it (another process) plugs in here too.
    runner = cc.runner
    if runner is not None:
        return runner(cc, target, args, kwargs, is_async)
    if target.is_async:
        return _tool_async(cc, handler, args, kwargs)
    if is_async:  # a sync handler under async steps: on a worker, never on the event loop
        return in_worker(session.server, partial(_tool_sync, cc, handler, args, kwargs))
    return _tool_sync(cc, handler, args, kwargs)


def _tool_sync(cc: CallContext, handler: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    cid = cc._cid  # set by the policy's outermost step; minted here otherwise
    token = CORRELATION_ID.set(cc.correlation_id if cid is None else cid)
    try:
        value = handler(*args, **kwargs)
    except InputRequired:
        cc.state["answered"] = True
        return cc.handler_context.rounds().result()
    finally:
        CORRELATION_ID.reset(token)
    return value if cc.raw else cc.item.to_result(value)


async def _tool_async(cc: CallContext, handler: Callable[..., Any], args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    token = CORRELATION_ID.set(cc.correlation_id)
    try:
        value = await handler(*args, **kwargs)
    except InputRequired:
        cc.state["answered"] = True
        return cc.handler_context.rounds().result()
    finally:
        CORRELATION_ID.reset(token)
    return value if cc.raw else cc.item.to_result(value)


class ToolOutcome:
    """The outermost step of a tool call when no policy provides one: any failure becomes a
    result with isError (TL-10), shaped for the revision; internals stay in the log."""

    order = 0
    outcome = True
    passes_through = True

    def on_call_tool(self, cc: CallContext, call_next: CallNext) -> Any:
        try:
            result = call_next(cc)
        except McpError:
            raise
        except Exception as exc:  # noqa: BLE001
            return self.failed(cc, exc)
        return self.shaped(cc, result)

    async def on_call_tool_async(self, cc: CallContext, call_next: CallNext) -> Any:
        try:
            result = call_next(cc)
            if inspect.isawaitable(result):
                result = await result
        except McpError:
            raise
        except Exception as exc:  # noqa: BLE001
            return self.failed(cc, exc)
        return self.shaped(cc, result)

    @staticmethod
    def failed(cc: CallContext, exc: BaseException) -> dict[str, Any]:
        # a refusal by a step (scope, middleware) says what kind of failure it is, as the tool's own does
        return _tool_failure(cc.item, exc, cc.correlation_id)

    @staticmethod
    def shaped(cc: CallContext, result: Any) -> Any:
        rev = cc.request.revision
        if rev.downgrades and type(result) is dict:
            return shape_for_revision(result, rev)
        return result


TOOL_OUTCOME = ToolOutcome()


def _raise_unknown(cc: CallContext, is_async: bool) -> Any:
    name = clipped(cc.name)
    if not cc.nested:
        raise McpError(INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})  # TL-10
    raise ToolError(f"Unknown tool: {name}", code=E_NOT_FOUND)


# ---------------------------------------------------------------------- resources, prompts, completions


#: what a resource or prompt handler raises on purpose (protocol/errors.py handler_error)
_ON_PURPOSE = (ToolError, ResourceNotFound, PromptNotFound)


def _invoke(
    fn: Callable[..., Any], is_async: bool, args: tuple[Any, ...], kwargs: dict[str, Any],
    finish: Callable[[Any], dict[str, Any]], ctx: Context | None, mode: str, server: Any = None,
    on_purpose: Callable[[BaseException], McpError | None] | None = None,
) -> Any:
    """A user handler as its pipeline runs it. ``mode``: "outer" (no step: a coroutine, or a
    SyncCall for the session to run), "sync" (a sync chain: run it here) or "async" (an
    awaitable; a sync handler goes to a worker thread). ``on_purpose`` turns what the handler
    raised on purpose into its JSON-RPC error."""
    if ctx is not None and ctx._request.revision.era == "modern":
        ctx.rounds()  # a tampered requestState is refused before the handler runs (MR-06)
    if is_async:

        async def run() -> dict[str, Any]:
            try:
                return finish(await fn(*args, **kwargs))
            except InputRequired:
                return ctx.rounds().result()  # type: ignore[union-attr]
            except _ON_PURPOSE as exc:
                raise (on_purpose(exc) if on_purpose is not None else None) or exc from None

        return run()

    def call() -> dict[str, Any]:
        try:
            return finish(fn(*args, **kwargs))
        except InputRequired:
            return ctx.rounds().result()  # type: ignore[union-attr]
        except _ON_PURPOSE as exc:
            raise (on_purpose(exc) if on_purpose is not None else None) or exc from None

    if mode == "sync":
        return call()
    if mode == "async":
        return in_worker(server, call)
    return SyncCall(call)


def _bind_item(item: Any, kwargs: dict[str, Any], what: str) -> dict[str, Any]:
    """Checking parameter types (a SandboxPath) of a template's variables or a prompt's
    arguments, as for tools: a refused value is a JSON-RPC error naming the parameter."""
    bind = item.bind
    if bind is None:
        return kwargs
    try:
        return bind(kwargs)  # type: ignore[no-any-return]
    except ToolError as exc:
        raise McpError(INVALID_PARAMS, f"{what}: {exc.message}", {"code": exc.code}) from None
    except (TypeError, ValueError) as exc:
        raise McpError(INVALID_PARAMS, f"{what}: {exc}") from None
    except OSError as exc:
        raise McpError(INVALID_PARAMS, f"{what}: the path cannot be checked ({exc.strerror or exc}).") from None


def _run_kind(session: ServerSession, req: RequestReceived, kind: str, item: Any, name: str | None,
              arguments: Any) -> Any:
    server = session.server
    pipe = server._pipes.get((kind, item))
    if pipe is None:
        pipe = kept_pipe(server, kind, item)
    cc = CallContext(session, req, kind, item, name, arguments)
    if pipe.plain:
        return TERMINALS[kind](cc, "outer")
    return _start(pipe, cc)


def read_resource(session: ServerSession, req: RequestReceived) -> Any:
    uri = _str_param(req.params or {}, "uri", "resources/read")
    found = session.server.find_resource(uri)
    if found is None:
        return _run_missing(session, req, "read_resource", uri, None)
    item, variables = found
    return _run_kind(session, req, "read_resource", item, uri, variables)


def _run_missing(session: ServerSession, req: RequestReceived, kind: str, name: str, arguments: Any) -> Any:
    """A read or prompt of nothing registered: refused at once, or under a policy or middleware
    in a pipeline of its own (not kept: the names are the caller's)."""
    server = session.server
    if server._policy is None and not server._middleware:
        raise _missing(server, req, kind, name)
    unknown = _Unknown(name)
    pipe = build_pipe(server, kind, unknown)
    if pipe.plain:
        raise _missing(server, req, kind, name)
    return _start(pipe, CallContext(session, req, kind, unknown, name, arguments))


def _read(cc: CallContext, mode: str) -> Any:
    session, req, item, uri = cc.session, cc.request, cc.item, cc.name
    kwargs = _bind_item(item, dict(cc.arguments or {}), f"Resource {uri}") if cc.arguments else {}
    ctx = None
    if item.context_param is not None:
        ctx = kwargs[item.context_param] = session.context(req)
        ctx._names = item.call_names
    hints = session.server.cache_hints(req.revision, item)

    def finish(value: Any) -> dict[str, Any]:
        try:
            return {"contents": contents_from(uri, item.mime_type, value), **hints}  # type: ignore[arg-type]
        except TypeError as exc:
            log.error("resources/read %s: %s", uri, exc)
            raise McpError(INTERNAL_ERROR, f"The resource handler for {uri} returned an unusable value.") from None

    rev = req.revision
    cc.ran = True  # a failure from here on is the handler's, not a refusal
    return _invoke(item.handler, item.is_async, (), kwargs, finish, ctx, mode, session.server,
                   lambda exc: handler_error(exc, rev.resource_not_found, uri=uri))


def subscribe(session: ServerSession, req: RequestReceived) -> Any:
    uri = _str_param(req.params or {}, "uri", "resources/subscribe")
    return _run_kind(session, req, "subscribe", _subscribed_item(session, req, uri), uri, None)


def watch(session: ServerSession, req: RequestReceived, uri: str) -> Any:
    """A URI of a subscriptions/listen request's ``resourceSubscriptions`` (2026-07-28): checked
    as a resources/subscribe of it is (existence, scopes, the policy's guards, middleware, audit),
    on the listen request's loop; the value, or an awaitable of it. The listener keeps the URI."""
    item = _subscribed_item(session, req, uri)
    pipe = session.server._pipes.get(("subscribe", item)) or kept_pipe(session.server, "subscribe", item)
    cc = CallContext(session, req, "subscribe", item, uri, None)
    return TERMINALS["subscribe"](cc, "sync") if pipe.plain else pipe.run(cc)


def _subscribed_item(session: ServerSession, req: RequestReceived, uri: str) -> Any:
    """The resource or template a subscription to ``uri`` is to, or not found (RS-10)."""
    found = session.server.find_resource(uri)
    if found is None:
        raise session.server.not_found(uri, req.revision)
    return found[0]


def _subscribe(cc: CallContext, mode: str) -> Any:
    if cc.request.method == "resources/subscribe":  # a listen stream's URIs are its own (listen.py)
        cc.session.subscriptions.add(cc.name)  # RS-10
    return _settled({}) if mode == "async" else {}


def unsubscribe(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
    uri = _str_param(req.params or {}, "uri", "resources/unsubscribe")
    session.subscriptions.discard(uri)
    return {}


def get_prompt(session: ServerSession, req: RequestReceived) -> Any:
    params = req.params or {}
    name = _str_param(params, "name", "prompts/get")
    prompt = session.server._prompts.get(name)
    if prompt is None:
        return _run_missing(session, req, "get_prompt", name, params.get("arguments"))
    return _run_kind(session, req, "get_prompt", prompt, name, params.get("arguments"))


def _get_prompt(cc: CallContext, mode: str) -> Any:
    session, req, prompt = cc.session, cc.request, cc.item
    arguments = prompt.check_arguments(cc.arguments)
    what = f"Prompt {prompt.name!r}"
    try:
        converted = prompt.convert(arguments)  # typed parameters: converted, or -32602
    except ToolError as exc:  # a checking type (SandboxPath) refused the value
        raise McpError(INVALID_PARAMS, f"{what}: {exc.message}", {"code": exc.code}) from None
    except OSError as exc:
        raise McpError(INVALID_PARAMS, f"{what}: the path cannot be checked ({exc.strerror or exc}).") from None
    kwargs: dict[str, Any] = _bind_item(prompt, dict(converted), what)
    ctx = None
    if prompt.context_param is not None:
        ctx = kwargs[prompt.context_param] = session.context(req)
        ctx._names = prompt.call_names
    rev = req.revision

    def finish(value: Any) -> dict[str, Any]:
        result = messages_from(value, prompt.description)
        if rev.downgrades:
            from .tools import downgrade_block

            result = dict(result)
            result["messages"] = [
                {**m, "content": downgrade_block(m["content"], rev)} for m in result["messages"]
            ]
        return result

    cc.ran = True  # a failure from here on is the handler's, not a refusal
    return _invoke(prompt.handler, prompt.is_async, (), kwargs, finish, ctx, mode, session.server,
                   lambda exc: handler_error(exc, rev.resource_not_found))


def complete(session: ServerSession, req: RequestReceived) -> Any:
    params = req.params or {}
    ref = params.get("ref")
    argument = params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise McpError(INVALID_PARAMS, "completion/complete needs 'ref' and 'argument' objects.")
    arg_name = argument.get("name")
    value = argument.get("value", "")
    if not isinstance(arg_name, str) or not isinstance(value, str):
        raise McpError(INVALID_PARAMS, "completion/complete needs argument.name and argument.value strings.")
    # CP-05: the completion of an item follows its rules (scopes) as a read or get of it would
    target = session.server.completion_target(ref)  # raises -32602 for unknown refs (CP-03)
    name = ref.get("name") if ref.get("type") == "ref/prompt" else ref.get("uri")
    return _run_kind(session, req, "complete", target, name, params)


def _complete(cc: CallContext, mode: str) -> Any:
    params = cc.arguments
    ref, argument = params["ref"], params["argument"]
    context = params.get("context")
    context_args = context.get("arguments") if isinstance(context, dict) else None
    completer = cc.session.server.completer_for(ref, argument["name"])
    if completer is None:
        result = {"completion": _completion([])}
        return _settled(result) if mode == "async" else result
    args = completer.arguments(ref, argument["name"], argument.get("value", ""), context_args or {})
    kwargs: dict[str, Any] = {}
    if completer.context_param is not None:  # built only for a completer that asks for it
        ctx = kwargs[completer.context_param] = cc.session.context(cc.request)
        ctx._names = cc.item.call_names  # ctx.call_tool names, as in the completed item's handler
    return _invoke(completer.fn, completer.is_async, args, kwargs,
                   lambda v: {"completion": _completion(v)}, None, mode, cc.session.server)


def _lists(kind: str) -> Callable[[CallContext, str], Any]:
    def terminal(cc: CallContext, mode: str) -> Any:
        server = cc.session.server
        search = server._tool_search if kind == "tools" else None
        result = server.list_page(kind, cc.request.revision, (cc.arguments or {}).get("cursor"),
                                  cc.request.client_info, full=search is None or search.wants_full(cc))
        return _settled(result) if mode == "async" else result

    return terminal


# ---------------------------------------------------------------------- the Skills extension (SEP-2640)


def _skills_served(session: ServerSession, method: str) -> None:
    """The methods exist only where the extension is declared: a server without skills has none."""
    if session.server.skills_capability() is None:
        raise McpError(METHOD_NOT_FOUND, f"Method not found: {method} (this server serves no skills)")


def _skill_method(kind: str, method: str, directory: bool = False) -> Handler:
    def handler(session: ServerSession, req: RequestReceived) -> Any:
        _skills_served(session, method)
        # as declared: a proxy whose upstreams declare no directoryRead does not answer it either
        if directory and (session.server.skills_capability() or {}).get("directoryRead") is not True:
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {method} (this server does not declare "
                                             "directoryRead)")
        params = req.params or {}
        return _run_kind(session, req, kind, None, params.get("uri"), params)

    handler.__name__ = kind
    return handler


def _skills_terminal(cc: CallContext, mode: str) -> Any:
    server, rev = cc.session.server, cc.request.revision
    params = cc.arguments or {}
    missing = missing_scopes(cc)
    if cc.kind == "list_skills":
        result = server.skills_page(params.get("cursor"), missing, server.page_size)
    elif cc.kind == "get_skill":
        result = server.skill_entry(params.get("uri"), missing)
    else:
        result = server.directory_page(params.get("uri"), params.get("cursor"), missing, server.page_size)
    # SEP-2640: skills/list carries ttlMs and cacheScope from 2026-07-28 on; for skills/get the
    # SEP leaves it open, and the stable specification requires them (GetSkillResult is a
    # CacheableResult), so both carry them, as resources/list does for directory reads
    result.update(server.cache_hints(rev, None))
    return _settled(result) if mode == "async" else result


TERMINALS: dict[str, Callable[[CallContext, str], Any]] = {
    "read_resource": _read,
    "subscribe": _subscribe,
    "get_prompt": _get_prompt,
    "complete": _complete,
    "list_tools": _lists("tools"),
    "list_resources": _lists("resources"),
    "list_resource_templates": _lists("resourceTemplates"),
    "list_prompts": _lists("prompts"),
    "list_skills": _skills_terminal,
    "get_skill": _skills_terminal,
    "read_directory": _skills_terminal,
}


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
    if kind == "call_tool":
        if not any(getattr(s, "outcome", False) for s in steps):
            steps.insert(0, TOOL_OUTCOME)
        plain = len(steps) == 1 and steps[0] is TOOL_OUTCOME
        actions = getattr(item, "actions", None)
        handler_async = bool(getattr(item, "is_async", False)) or (
            actions is not None and any(a.is_async for a in actions.values()))
        run_handler: Callable[[CallContext, bool], Any] = _raise_unknown if isinstance(item, _Unknown) else run_tool
    else:
        plain = not steps
        handler_async = _handler_async(server, kind, item)
        run_handler = _raise_missing if isinstance(item, _Unknown) else TERMINALS[kind]  # type: ignore[assignment]
    is_async = handler_async or any_async(steps, kind)
    if kind == "call_tool":
        terminal: Callable[[CallContext], Any] = partial(run_handler, is_async=is_async)
    else:
        terminal = partial(run_handler, mode="async" if is_async else "sync")
    return Pipe(chain(steps, kind, terminal, is_async, server), is_async, plain, steps)


def _handler_async(server: Any, kind: str, item: Any) -> bool:
    if kind in ("read_resource", "get_prompt"):
        return bool(item.is_async)
    if kind == "complete":
        completers = list((getattr(item, "completions", None) or {}).values())
        if server._completer is not None:
            completers.append(server._completer)
        return any(c.is_async for c in completers)
    return False


def _list(kind: str) -> Handler:
    def handler(session: ServerSession, req: RequestReceived) -> Any:
        return _run_kind(session, req, kind, None, None, req.params)

    handler.__name__ = kind
    return handler


# ---------------------------------------------------------------------- completion, logging


def _completion(values: Any) -> dict[str, Any]:
    """CP-02: at most 100 values; total and hasMore say what was left out."""
    if isinstance(values, dict):
        out = dict(values)
        vals = [str(v) for v in out.get("values", [])]
        if len(vals) > 100:
            out.setdefault("total", len(vals))
            out["hasMore"] = True
            vals = vals[:100]
        out["values"] = vals
        return out
    vals = [str(v) for v in (values or [])]
    total = len(vals)
    return {"values": vals[:100], "total": total, "hasMore": total > 100}


def set_level(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
    level = (req.params or {}).get("level")
    if level not in LOG_LEVELS:
        raise McpError(INVALID_PARAMS, f"Unknown log level {clipped(level)!r}; use one of: {', '.join(LOG_LEVELS)}.")  # LG-02
    session.log_level = level
    return {}


def discover(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
    """VN-03: what this server supports; the modern era's answer to "who are you"."""
    server = session.server
    result: dict[str, Any] = {
        "supportedVersions": list(SUPPORTED_VERSIONS),
        "capabilities": server.capabilities(req.revision),
    }
    if server.instructions:
        result["instructions"] = server.instructions
    result.update(server.cache_hints(req.revision, None))
    return result


METHODS: dict[str, Handler] = {
    "server/discover": discover,
    "subscriptions/listen": listen,
    "tools/list": _list("list_tools"),
    "tools/call": call_tool,
    "resources/list": _list("list_resources"),
    "resources/templates/list": _list("list_resource_templates"),
    "resources/read": read_resource,
    "resources/subscribe": subscribe,
    "resources/unsubscribe": unsubscribe,
    "prompts/list": _list("list_prompts"),
    "prompts/get": get_prompt,
    "completion/complete": complete,
    "logging/setLevel": set_level,
    **TASK_METHODS,  # the io.modelcontextprotocol/tasks extension, 2026-07-28 only
    "skills/list": _skill_method("list_skills", "skills/list"),
    "skills/get": _skill_method("get_skill", "skills/get"),
    "resources/directory/read": _skill_method("read_directory", "resources/directory/read", directory=True),
}
