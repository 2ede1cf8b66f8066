"""Method -> handler table: each handler reads a request, finds the item it names and asks
the item's pipe (server/pipes.py) to run it.

Each handler takes ``(session, request)`` (a RequestReceived: id, method, params, and the
revision and client capabilities it is served under) and returns a result dict
(answered at once) or an awaitable (a task or a worker-thread future) whose
result is the result dict. Errors are McpError with the revision's code. Steps, handlers and
how they run are the pipeline's (pipeline.py, pipes.py, terminals.py); the session writes the
answer or the error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import INVALID_PARAMS, METHOD_NOT_FOUND, McpError, clipped
from ..protocol.engine import RequestReceived
from ..protocol.revisions import LOG_LEVELS, SUPPORTED_VERSIONS
from .listen import listen
from .pipeline import CallContext
from .pipes import kept_pipe, pipe_of, run_nested, serve_missing
from .tasks import TASK_METHODS

if TYPE_CHECKING:
    from .context import Context
    from .session import ServerSession

__all__ = ["METHODS", "call_nested", "watch"]

Handler = Callable[["ServerSession", RequestReceived], Any]


def _str_param(params: dict[str, Any], key: str, method: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise McpError(INVALID_PARAMS, f"{method} needs a string {key!r} parameter.")
    return value


def call_tool(session: ServerSession, req: RequestReceived) -> Any:
    server = session.server
    params = req.params or {}
    name = params.get("name")
    if type(name) is not str:
        name = _str_param(params, "name", "tools/call")  # a str subclass passes; anything else is refused
    tool = server._tools.get(name)
    if server._host_schemas is not None:  # the host's name and nulls, read back (mcpkit/hostschemas.py)
        tool, name, params = server.host_call(req.client_info, tool, name, params)
    if tool is None:  # under a policy or middleware, refused in a pipe: audited, seen by middleware
        return serve_missing(session, req, "call_tool", name, params.get("arguments"))
    pipe = server._tool_pipes.get(tool)  # pipe_of, inline: the hot path
    if pipe is None:
        pipe = kept_pipe(server, "call_tool", tool)
    # the plain fast path where no step applies (no policy, scope or middleware); else the
    # steps, or the whole pipe as a task (TX-01)
    return pipe.serve(session, req, tool, name, params.get("arguments"))


def call_nested(ctx: Context, name: str, arguments: Any, *, want_async: bool) -> Any:
    """``ctx.call_tool``: a tool called from inside another takes the same pipeline as a call
    from the client (scopes, gates, limits, middleware, audit); a refusal is its result."""
    session = ctx._session
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
    return run_nested(ctx, session.server._tools.get(name), name, arguments, want_async=want_async)


def _serve(session: ServerSession, req: RequestReceived, kind: str, item: Any, name: str | None,
           arguments: Any) -> Any:
    return pipe_of(session.server, kind, item).serve(session, req, item, name, arguments)


def read_resource(session: ServerSession, req: RequestReceived) -> Any:
    uri = _str_param(req.params or {}, "uri", "resources/read")
    found = session.server.find_resource(uri)
    if found is None:
        return serve_missing(session, req, "read_resource", uri, None)
    item, variables = found
    return _serve(session, req, "read_resource", item, uri, variables)


def subscribe(session: ServerSession, req: RequestReceived) -> Any:
    uri = _str_param(req.params or {}, "uri", "resources/subscribe")
    return _serve(session, req, "subscribe", _subscribed_item(session, req, uri), uri, None)


def watch(session: ServerSession, req: RequestReceived, uri: str) -> Any:
    """A URI of a subscriptions/listen request's ``resourceSubscriptions`` (2026-07-28): checked
    as a resources/subscribe of it is (existence, scopes, the policy's guards, middleware, audit),
    on the listen request's loop; the value, or an awaitable of it. The listener keeps the URI."""
    item = _subscribed_item(session, req, uri)
    return pipe_of(session.server, "subscribe", item).run(CallContext(session, req, "subscribe", item, uri, None))


def _subscribed_item(session: ServerSession, req: RequestReceived, uri: str) -> Any:
    """The resource or template a subscription to ``uri`` is to, or not found (RS-10)."""
    found = session.server.find_resource(uri)
    if found is None:
        raise session.server.not_found(uri, req.revision)
    return found[0]


def unsubscribe(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
    uri = _str_param(req.params or {}, "uri", "resources/unsubscribe")
    session.subscriptions.discard(uri)
    return {}


def get_prompt(session: ServerSession, req: RequestReceived) -> Any:
    params = req.params or {}
    name = _str_param(params, "name", "prompts/get")
    prompt = session.server._prompts.get(name)
    if prompt is None:
        return serve_missing(session, req, "get_prompt", name, params.get("arguments"))
    return _serve(session, req, "get_prompt", prompt, name, params.get("arguments"))


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
    return _serve(session, req, "complete", target, name, params)


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
        return _serve(session, req, kind, None, params.get("uri"), params)

    handler.__name__ = kind
    return handler


def _list(kind: str) -> Handler:
    def handler(session: ServerSession, req: RequestReceived) -> Any:
        return _serve(session, req, kind, None, None, req.params)

    handler.__name__ = kind
    return handler


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
