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
from typing import TYPE_CHECKING, Any

from ..protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    McpError,
    PromptNotFound,
    ResourceNotFound,
    ToolError,
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
from .rounds import InputRequired
from .session import SyncCall, _is_cancelled, new_correlation_id
from .tasks import TASK_METHODS, missing_extension, wants_tasks
from .validation import format_errors

if TYPE_CHECKING:
    from .session import ServerSession

__all__ = ["METHODS"]

log = logging.getLogger("mcpkit")

Handler = Callable[["ServerSession", RequestReceived], Any]


def _str_param(params: dict[str, Any], key: str, method: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise McpError(INVALID_PARAMS, f"{method} needs a string {key!r} parameter.")
    return value


# ---------------------------------------------------------------------- lists (PA-01, PA-02)


def _lister(kind: str) -> Handler:
    def handler(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
        return session.server.list_page(kind, req.revision, (req.params or {}).get("cursor"))

    handler.__name__ = f"list_{kind}"
    return handler


# ---------------------------------------------------------------------- tools


def _tool_failure(tool: Tool, exc: BaseException, correlation_id: str | None) -> dict[str, Any]:
    """TL-10: a tool's failure is a result with isError; internals stay in the log."""
    correlation_id = correlation_id or new_correlation_id()
    if isinstance(exc, ToolError):
        message = str(exc) or f"Tool {tool.name!r} failed."
    elif isinstance(exc, (ClientCapabilityError, ClientRequestError, ClientTimeoutError)):
        message = str(exc)
    elif isinstance(exc, OutputSchemaError):
        log.error("tool %r: %s (correlation id %s)", tool.name, exc, correlation_id)
        message = f"Tool {tool.name!r} produced output that does not match its outputSchema (correlation id {correlation_id})."
    else:
        log.error("tool %r raised (correlation id %s)", tool.name, correlation_id, exc_info=exc)
        message = f"Internal error while running tool {tool.name!r} (correlation id {correlation_id})."
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


_CHAIN: Any = None


def _policy_chain() -> Any:
    """policy/chain.py's call_tool, imported on the first policed call (not per call)."""
    global _CHAIN
    if _CHAIN is None:
        from ..policy.chain import call_tool as chain_call

        _CHAIN = chain_call
    return _CHAIN


def call_tool(session: ServerSession, req: RequestReceived) -> Any:
    server = session.server
    params = req.params or {}
    name = _str_param(params, "name", "tools/call")
    tool = server._tools.get(name)
    if tool is None:
        raise McpError(INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})  # TL-10
    if server._policy is not None or tool.options is not None or tool.actions is not None:
        return _policy_chain()(session, req, tool, params.get("arguments"))
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
        if rev.era == "modern":
            ctx.rounds()  # a tampered requestState is refused before the tool runs (MR-06)
        cid: str | None = ctx.correlation_id
    else:
        cid = None  # minted only if something goes wrong: the hot path stays cheap
    try:
        args, kwargs = tool.call_args(valid, ctx)  # type: ignore[arg-type]
    except ToolError as exc:  # a checking parameter type refused the value (a confined path)
        return _tool_failure(tool, exc, cid)
    except (TypeError, ValueError) as exc:  # the binder could not build the Python values
        message = f"Invalid arguments for tool {name!r}: {exc}"
        if rev.invalid_arguments_as_tool_error:
            return {"content": [{"type": "text", "text": message}], "isError": True}
        raise McpError(INVALID_PARAMS, message) from None
    if as_task:
        if tool.task_after_input:
            return _task_after_input(session, req, tool, args, kwargs, cid, ctx)  # type: ignore[arg-type]
        return _start_task(session, req, tool, args, kwargs, cid, ctx)
    if tool.is_async:
        return _run_async(tool, args, kwargs, rev, cid, ctx)
    return SyncCall(lambda: _run_sync(tool, args, kwargs, rev, cid, ctx))


# ---------------------------------------------------------------------- tools as tasks (TX-01..TX-05)


def start_as_task(session: ServerSession, req: RequestReceived, tool: Tool, valid: dict[str, Any]) -> Any:
    """The policy chain's way into the tasks extension: the call's outcome when the client gets
    it as a task (TX-01), else None (the chain runs it as a plain call)."""
    if not wants_tasks(req.capabilities):
        if tool.task == "required":
            raise missing_extension(f"Tool {tool.name!r}")
        return None
    ctx = session.context(req) if tool.context_param is not None else None
    cid = ctx.correlation_id if ctx is not None else None
    args, kwargs = tool.call_args(valid, ctx)  # type: ignore[arg-type]
    if tool.task_after_input:
        return _task_after_input(session, req, tool, args, kwargs, cid, ctx)  # type: ignore[arg-type]
    return _start_task(session, req, tool, args, kwargs, cid, ctx)


def _start_task(
    session: ServerSession, req: RequestReceived, tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any],
    cid: str | None, ctx: Context | None,
) -> dict[str, Any]:
    """Store the task (TX-03), start the handler in the background, answer CreateTaskResult (TX-02)."""
    manager = session.server.tasks
    record = manager.create(session)
    rev = req.revision
    if ctx is not None:
        session._contexts.pop(req.id, None)  # the request is answered now; the task owns the context
        ctx._task = (manager, record)
        ctx.cancelled = record.cancel_event
    if tool.is_async:
        import asyncio

        async def run() -> None:
            try:
                result = await _run_async(tool, args, kwargs, rev, cid, ctx)
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

        session.server.workers.submit(lambda: _run_sync(tool, args, kwargs, rev, cid, ctx), done)
    return record.created()


def _task_after_input(
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
            result = await _run_async(tool, args, kwargs, rev, cid, ctx)
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




# ---------------------------------------------------------------------- resources


#: what a resource or prompt handler raises on purpose (protocol/errors.py handler_error)
_ON_PURPOSE = (ToolError, ResourceNotFound, PromptNotFound)


def _invoke(
    fn: Callable[..., Any], is_async: bool, args: tuple[Any, ...], kwargs: dict[str, Any],
    finish: Callable[[Any], dict[str, Any]], ctx: Context | None = None,
    on_purpose: Callable[[BaseException], McpError | None] | None = None,
) -> Any:
    """A user handler as the session runs it: a coroutine, or a SyncCall for a sync function.
    ``on_purpose`` turns what the handler raised on purpose into its JSON-RPC error."""
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

    return SyncCall(call)


def read_resource(session: ServerSession, req: RequestReceived) -> Any:
    uri = _str_param(req.params or {}, "uri", "resources/read")
    found = session.server.find_resource(uri)
    if found is None:
        raise session.server.not_found(uri, req.revision)
    item, variables = found
    kwargs = dict(variables)
    ctx = None
    if item.context_param is not None:
        ctx = kwargs[item.context_param] = session.context(req)
    hints = session.server.cache_hints(req.revision, item)

    def finish(value: Any) -> dict[str, Any]:
        try:
            return {"contents": contents_from(uri, item.mime_type, value), **hints}
        except TypeError as exc:
            log.error("resources/read %s: %s", uri, exc)
            raise McpError(INTERNAL_ERROR, f"The resource handler for {uri} returned an unusable value.") from None

    rev = req.revision
    return _invoke(item.handler, item.is_async, (), kwargs, finish, ctx,
                   lambda exc: handler_error(exc, rev.resource_not_found, uri=uri))


def subscribe(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
    uri = _str_param(req.params or {}, "uri", "resources/subscribe")
    if session.server.find_resource(uri) is None:
        raise session.server.not_found(uri, req.revision)
    session.subscriptions.add(uri)  # RS-10
    return {}


def unsubscribe(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
    uri = _str_param(req.params or {}, "uri", "resources/unsubscribe")
    session.subscriptions.discard(uri)
    return {}


# ---------------------------------------------------------------------- prompts


def get_prompt(session: ServerSession, req: RequestReceived) -> Any:
    params = req.params or {}
    name = _str_param(params, "name", "prompts/get")
    prompt = session.server._prompts.get(name)
    if prompt is None:
        raise McpError(INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})  # PM-05
    arguments = prompt.check_arguments(params.get("arguments"))
    kwargs: dict[str, Any] = prompt.convert(arguments)  # typed parameters: converted, or -32602
    ctx = None
    if prompt.context_param is not None:
        ctx = kwargs[prompt.context_param] = session.context(req)
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

    return _invoke(prompt.handler, prompt.is_async, (), kwargs, finish, ctx,
                   lambda exc: handler_error(exc, rev.resource_not_found))


# ---------------------------------------------------------------------- completion, logging


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
    context = params.get("context")
    context_args = context.get("arguments") if isinstance(context, dict) else None
    fn = session.server.completer_for(ref, arg_name)  # raises -32602 for unknown refs (CP-03)

    if fn is None:
        return {"completion": _completion([])}
    return _invoke(
        fn, inspect.iscoroutinefunction(fn), (value, context_args or {}), {}, lambda v: {"completion": _completion(v)}
    )


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
        raise McpError(INVALID_PARAMS, f"Unknown log level {level!r}; use one of: {', '.join(LOG_LEVELS)}.")  # LG-02
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
    "tools/list": _lister("tools"),
    "tools/call": call_tool,
    "resources/list": _lister("resources"),
    "resources/templates/list": _lister("resourceTemplates"),
    "resources/read": read_resource,
    "resources/subscribe": subscribe,
    "resources/unsubscribe": unsubscribe,
    "prompts/list": _lister("prompts"),
    "prompts/get": get_prompt,
    "completion/complete": complete,
    "logging/setLevel": set_level,
    **TASK_METHODS,  # the io.modelcontextprotocol/tasks extension, 2026-07-28 only
}
