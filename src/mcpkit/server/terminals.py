"""The terminal step of every pipe: bind the item's arguments, run its handler, shape its value.

pipeline.py says what a step is and chains the steps; pipes.py ends each item's chain with the
terminal of its kind from here. A tool's handler is started in :func:`run_tool` under steps, and
in :func:`plain_call` on the plain path (no step applies: the pipe is this terminal alone, run
without a CallContext); a resource's, prompt's or completer's in :func:`_invoke`. Failures are
raised for the outermost step to answer and audit, or (a tool without such a step) made a result
with isError by :data:`TOOL_OUTCOME` (TL-10).
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
    INTERNAL_ERROR,
    INVALID_PARAMS,
    McpError,
    PromptNotFound,
    ResourceNotFound,
    ToolError,
    clipped,
    handler_error,
)
from ..protocol.engine import RequestReceived
from ..protocol.revisions import Revision
from .context import ClientCapabilityError, ClientRequestError, ClientTimeoutError, Context
from .pipeline import CORRELATION_ID, ERROR_META_KEY, CallContext, CallNext, in_worker
from .prompts import messages_from
from .resources import contents_from
from .rounds import InputRequired
from .session import SyncCall, new_correlation_id
from .skills import missing_scopes
from .tasks import missing_extension, wants_tasks
from .tools import OutputSchemaError, Tool, shape_for_revision
from .validation import format_errors

if TYPE_CHECKING:
    from .session import ServerSession

__all__ = ["TERMINALS", "TOOL_OUTCOME", "Unknown", "missing", "plain_call", "refuse_missing", "run_async", "run_sync",
           "run_tool", "settled"]

log = logging.getLogger("mcpkit")

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


def run_sync(
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


async def run_async(
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

def plain_call(session: ServerSession, req: RequestReceived, tool: Tool, name: str, arguments: Any) -> Any:
    """A tools/call of a tool no step applies to (no policy, scope or middleware): the plain fast
    path, a pipe of this terminal alone. It validates, binds and runs as run_tool does, without a
    CallContext, and answers a failure itself (TL-10)."""
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
        return run_async(tool, args, kwargs, rev, cid, ctx)
    return SyncCall(lambda: run_sync(tool, args, kwargs, rev, cid, ctx))


async def settled(value: Any) -> Any:
    """``value`` as an awaitable: what an async chain's terminal returns of a value it has."""
    return value


class Unknown:
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


def missing(server: Any, req: RequestReceived, kind: str, name: str) -> McpError:
    """The refusal of a call, read or prompt of nothing registered."""
    if kind == "call_tool":
        name = clipped(name)
        return McpError(INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})  # TL-10
    if kind == "read_resource":
        return server.not_found(name, req.revision)  # RS-08
    name = clipped(name)
    return McpError(INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})  # PM-05


def refuse_missing(cc: CallContext, **_how: Any) -> Any:
    """The terminal of a pipe of nothing registered (an Unknown): its refusal; a nested call's
    is a ToolError, which the caller's tool gets as a result with isError. How the pipe would
    run a handler (``is_async``, ``mode``) is of no use to a refusal."""
    if cc.nested:
        raise ToolError(f"Unknown tool: {clipped(cc.name)}", code=E_NOT_FOUND)
    raise missing(cc.session.server, cc.request, cc.kind, cc.name)


# ---------------------------------------------------------------------- a tool under steps


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


def _subscribe(cc: CallContext, mode: str) -> Any:
    if cc.request.method == "resources/subscribe":  # a listen stream's URIs are its own (listen.py)
        cc.session.subscriptions.add(cc.name)  # RS-10
    return settled({}) if mode == "async" else {}


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


def _complete(cc: CallContext, mode: str) -> Any:
    params = cc.arguments
    ref, argument = params["ref"], params["argument"]
    context = params.get("context")
    context_args = context.get("arguments") if isinstance(context, dict) else None
    completer = cc.session.server.completer_for(ref, argument["name"])
    if completer is None:
        result = {"completion": _completion([])}
        return settled(result) if mode == "async" else result
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
        return settled(result) if mode == "async" else result

    return terminal


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
    return settled(result) if mode == "async" else result


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


# ---------------------------------------------------------------------- completion


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


