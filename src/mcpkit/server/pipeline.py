"""The request pipeline: one path every handler call takes, whatever route it came by.

A request for an item (a tool call, a resource read, a prompt get, a completion, a list)
passes through an ordered list of steps and then the handler::

    outcome (errors -> results, audit) -> scopes -> gates, limits -> user middleware
    -> sandbox binding -> contract -> run the handler

Each step is an object with optional hooks, ``on_request`` (every kind) and one per kind
(``on_call_tool``, ``on_read_resource``, ``on_get_prompt``, ``on_complete``, ``on_list_tools``,
``on_list_resources``, ``on_list_resource_templates``, ``on_list_prompts``, and the Skills
extension's ``on_list_skills``, ``on_get_skill``, ``on_read_directory``); a hook takes
``(ctx, call_next)`` and returns what ``call_next(ctx)`` returned, or something else. User
middleware (:class:`Middleware`) and the policy's own steps (mcpkit.policy) share that shape.

This module says what a step is and how steps chain (:func:`steps_for`, :func:`chain`).
server/pipes.py chains the steps of each item to its kind's terminal step (server/terminals.py,
which runs the handler) once, when the item is first used, and again after the policy, the
middleware or the registry changes, and runs the result on every route: an item no step
applies to runs exactly as if there were no pipeline (the plain fast path); one whose steps
are all the policy layer's may have them composed into one by that layer (PolicyLayer.fuse).
The direct request, a nested ``ctx.call_tool``, a manager's action, a task and every revision
reach the handler only through there, so a rule enforced by a step holds on every route (TL-11).

This module knows nothing of the policy layer's modules, and never looks them up: a server
asks the layer it was given for the steps of each item, through the interface below
(:class:`PolicyLayer`): the Policy object it was given brings its own (``Policy.layer``); without
one (a tool's own limits, a manager tool), :func:`policy_layer` is the one the package root
provided (mcpkit/_wiring.py).
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from .. import _wiring
from .context import access_token_of, calling_request
from .session import new_correlation_id, partial_run

if TYPE_CHECKING:
    from ..protocol.engine import RequestReceived
    from .session import ServerSession

__all__ = ["CORRELATION_ID", "CallContext", "CallNext", "HOOKS", "Middleware", "Pipe", "layer_of", "policy_layer",
           "scopes_for"]

#: kind -> (hook name, JSON-RPC method)
HOOKS: dict[str, tuple[str, str]] = {
    "call_tool": ("on_call_tool", "tools/call"),
    "read_resource": ("on_read_resource", "resources/read"),
    "subscribe": ("on_subscribe", "resources/subscribe"),
    "get_prompt": ("on_get_prompt", "prompts/get"),
    "complete": ("on_complete", "completion/complete"),
    "list_tools": ("on_list_tools", "tools/list"),
    "list_resources": ("on_list_resources", "resources/list"),
    "list_resource_templates": ("on_list_resource_templates", "resources/templates/list"),
    "list_prompts": ("on_list_prompts", "prompts/list"),
    # the Skills extension (server/skills.py)
    "list_skills": ("on_list_skills", "skills/list"),
    "get_skill": ("on_get_skill", "skills/get"),
    "read_directory": ("on_read_directory", "resources/directory/read"),
}

#: the correlation id of the tool call running in this thread or task, for log lines about it
CORRELATION_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcpkit_cid", default=None)

#: where a result names its correlation id, and (without the envelope) its error (MT-02 key format)
CID_META_KEY = "dev.mcpkit/correlationId"
ERROR_META_KEY = "dev.mcpkit/error"

#: where user middleware sits among the policy's steps (lower runs first, further out)
MIDDLEWARE_ORDER = 50


class CallContext:
    """What every step sees of one request on its way to a handler.

    ``method`` and ``kind`` say what is asked; ``name`` is the tool or prompt name or the
    resource URI (None for lists); ``arguments`` may be replaced by a step before the
    handler sees them. ``principal``, ``session_id``, ``revision`` and ``correlation_id``
    say who asks, where and under which protocol revision, and how the call is named in
    logs and audit lines. ``state`` is a dict for steps to share what they learned.
    """

    # the attributes every call sets are slots; the rarer ones (a nested call's, a manager
    # action's, the handler's Context) live in __dict__ over the class defaults below, so a
    # plain call pays only for what it uses
    __slots__ = ("session", "request", "kind", "item", "name", "arguments", "target", "settings", "ran", "raw",
                 "made", "start", "caller", "_cid", "_state", "_scopes", "__dict__")

    #: a call made with ``ctx.call_tool`` from inside another, and that call's correlation id
    nested = False
    parent: str | None = None
    #: the action of a manager tool, once a step selected it
    action: str | None = None
    #: the handler's mcpkit.Context once made, and (nested calls) the caller's
    handler_context: Any = None
    outer_context: Any = None
    #: how the handler runs when not in this thread or loop: ``runner(ctx, handler, args,
    #: kwargs, is_async)``, set by a step (process isolation); None: here
    runner: Any = None
    #: a tools/call that may become a task (server/tool_tasks.py run_as_task): the future its
    #: announcement resolves, and once announced the (TaskManager, TaskRecord) it settles
    announce: Any = None
    task: Any = None
    #: what the handler reports through its Context for the envelope (mcpkit.policy.envelope
    #: Report: logs, warnings, files, details), set by the step that collects it; None: nothing does
    report: Any = None

    def __init__(self, session: ServerSession, request: RequestReceived, kind: str, item: Any, name: str | None,
                 arguments: Any, nested: bool = False, parent: str | None = None, cid: str | None = None) -> None:
        self.session = session
        self.request = request
        self.kind = kind
        self.item = item
        self.name = name
        self.arguments = arguments
        #: what runs: the item, or a manager tool's action
        self.target = item
        #: the policy's resolved settings for this call (mcpkit.policy), or None
        self.settings: Any = None
        #: True once the handler was started: a failure after it is the handler's, not a refusal
        self.ran = False
        #: set by a step that shapes the handler's own value itself (the tool contract)
        self.raw = False
        #: a result a step built itself (the envelope), which later steps may complete in place
        self.made: Any = None
        self._cid = cid
        self._state: dict[str, Any] | None = None
        self._scopes: tuple[str, ...] | None = None
        if nested:
            self.nested = True
            self.parent = parent

    @property
    def state(self) -> dict[str, Any]:
        """A dict for steps to share what they learned about this call."""
        state = self._state
        if state is None:
            state = self._state = {}
        return state

    @property
    def scopes(self) -> tuple[str, ...]:
        """The OAuth scopes this call needs: the item's, plus a manager action's own (the
        action step adds them), or, for a tool standing for a manager served elsewhere (a
        mount's mirror), those its ``action_scopes`` give the call's ``action`` argument."""
        scopes = self._scopes
        if scopes is not None:
            return scopes
        return scopes_for(self.item, self.arguments)

    @scopes.setter
    def scopes(self, value: tuple[str, ...]) -> None:
        self._scopes = tuple(value)

    @property
    def method(self) -> str:
        return HOOKS[self.kind][1]

    @property
    def principal(self) -> str | None:
        """The verified token's subject on an authenticated HTTP server, else None; in a
        mounted Server, the parent's caller's (as ``ctx.principal``)."""
        return calling_request(self.session, self.request)[0].principal

    @property
    def access_token(self) -> Any:
        """The verified token the request arrived with (a nested call: its caller's; in a
        mounted Server, the parent's caller's, as ``ctx.access_token``)."""
        return access_token_of(*calling_request(self.session, self.request))

    @property
    def session_id(self) -> str | None:
        return getattr(self.session, "session_id", None)

    @property
    def revision(self) -> str:
        return self.request.revision.version

    @property
    def correlation_id(self) -> str:
        cid = self._cid
        if cid is None:
            cid = self._cid = new_correlation_id()
        return cid

    @correlation_id.setter
    def correlation_id(self, value: str) -> None:
        self._cid = value

    def __repr__(self) -> str:
        return f"<CallContext {self.method} {self.name!r} correlation id {self._cid}>"


#: what a hook calls to pass the request on: the next step, or the handler
CallNext = Callable[[CallContext], Any]


class Middleware:
    """Base class of user middleware: override any of the hooks, each ``(ctx, call_next)``.

    ``on_request`` runs for every kind; ``on_call_tool``, ``on_read_resource``,
    ``on_get_prompt``, ``on_complete`` and ``on_list_tools`` / ``on_list_resources`` /
    ``on_list_resource_templates`` / ``on_list_prompts`` for theirs. A hook refuses by
    raising ToolError (a tool call answered with isError) or McpError (a JSON-RPC error),
    changes arguments by setting ``ctx.arguments`` before ``call_next(ctx)``, and changes a
    result by returning another one. Hooks may be ``def`` or ``async def``; see
    docs/middleware.md for when ``call_next`` returns an awaitable.
    """

    #: lower runs further out; the policy's refusals (scopes, gates, limits) come before 50
    order: int = MIDDLEWARE_ORDER


class _OneHook(Middleware):
    """A plain function as the middleware of one hook."""

    def __init__(self, hook: str, fn: Callable[[CallContext, CallNext], Any]) -> None:
        if hook != "on_request" and hook not in {h for h, _ in HOOKS.values()}:
            known = ", ".join(["on_request", *(h for h, _ in HOOKS.values())])
            raise ValueError(f"unknown middleware hook {hook!r}; use one of: {known}")
        setattr(self, hook, fn)
        self._fn = fn
        self._hook = hook

    def __repr__(self) -> str:
        return f"<middleware {self._hook} {getattr(self._fn, '__qualname__', self._fn)!r}>"


def as_middleware(mw: Any, hook: str | None) -> Any:
    """A middleware object from what ``Server.add_middleware`` was given."""
    if hook is not None:
        return _OneHook(hook, mw)
    if inspect.isfunction(mw) or inspect.ismethod(mw) or (callable(mw) and not _has_hooks(mw)):
        return _OneHook("on_request", mw)
    if not _has_hooks(mw):
        raise TypeError(f"{mw!r} is not middleware: give an object with on_* hooks, or a function")
    return mw


def _has_hooks(obj: Any) -> bool:
    return any(callable(getattr(obj, name, None)) for name in ("on_request", *(h for h, _ in HOOKS.values())))


# ------------------------------------------------------------------------------ the policy layer


class PolicyLayer(Protocol):
    """What the server asks of the policy layer: a Policy's ``layer``, or without one the layer
    the package root provides (:func:`policy_layer`); mcpkit.policy.layer implements it."""

    def steps(self, server: Any, kind: str, item: Any) -> list[Any]: ...
    def fuse(self, server: Any, kind: str, item: Any, steps: list[Any]) -> list[Any]: ...
    def resolve(self, value: Any) -> Any: ...
    def tool_options(self, options: dict[str, Any]) -> Any: ...
    def manager_tool(self, server: Any, name: str, **kw: Any) -> Any: ...
    def advertise(self, server: Any, tool: Any) -> None: ...
    def visible(self, server: Any, tool: Any) -> bool: ...
    def action_scopes(self, server: Any, tool: Any) -> dict[str, tuple[str, ...]]: ...
    def started(self, server: Any) -> None: ...
    def warm_up(self, server: Any) -> None: ...
    def redact(self, data: Any) -> Any: ...
    def warn_secret_parameters(self, tool: str, properties: dict[str, Any]) -> None: ...
    def check_isolated(self, func: Any, name: str, context_param: str | None) -> None: ...
    def audit_refused(self, server: Any, access: Any, message: dict[str, Any], missing: list[str]) -> None: ...


def policy_layer() -> PolicyLayer:
    """The policy layer for what a server needs of it without a Policy object in hand (a tool's
    own limits, a manager tool, ``policy=True``, the secret-parameter warning): the one the
    package root provided (mcpkit/_wiring.py). It sits above this package, which depends only
    on the interface."""
    return _wiring.policy_layer()  # type: ignore[no-any-return]


def layer_of(server: Any) -> PolicyLayer:
    """The policy layer of ``server``: its Policy's own (``Policy.layer``), or without one (a
    tool's own options, a manager tool) the one the package root provided."""
    policy = server._policy
    return policy.layer if policy is not None else policy_layer()  # type: ignore[no-any-return]


def scopes_for(item: Any, arguments: Any, per_action: Any = None) -> tuple[str, ...]:
    """The scopes a call of ``item`` with ``arguments`` needs: the item's own, and those
    ``per_action`` (action name -> scopes; default the item's ``action_scopes``, a mount's
    mirror of a manager) gives the ``action`` the arguments name."""
    own = getattr(item, "scopes", ()) or ()
    if per_action is None:
        per_action = getattr(item, "action_scopes", None)
    if per_action and isinstance(arguments, dict):
        action = arguments.get("action")
        more = per_action.get(action) if isinstance(action, str) else None
        if more:
            return tuple(dict.fromkeys([*own, *more]))
    return own


# ------------------------------------------------------------------------------ chaining


class Pipe:
    """The chained steps of one item and kind: ``run(ctx)``, and whether it must be awaited;
    ``serve(session, request, item, name, arguments)``, what a request from the client runs
    (server/pipes.py builds both)."""

    __slots__ = ("run", "is_async", "plain", "steps", "serve")

    def __init__(self, run: Callable[[CallContext], Any], is_async: bool, plain: bool, steps: list[Any]) -> None:
        self.run = run
        self.is_async = is_async
        #: no step applies: the direct request takes the kind's plain fast path
        self.plain = plain
        self.steps = steps
        self.serve: Any = None  # set with the pipe in hand (pipes.build_pipe)


def _applies(step: Any, kind: str, item: Any) -> bool:
    check = getattr(step, "applies", None)
    return check is None or bool(check(kind, item))


def hooks_of(step: Any, kind: str, is_async: bool) -> list[Callable[..., Any]]:
    """The hooks of ``step`` for ``kind``, outermost first; in an async chain a step's
    ``<hook>_async`` variant (the policy's steps have both) is preferred."""
    out = []
    for name in ("on_request", HOOKS[kind][0]):
        fn = getattr(step, name + "_async", None) if is_async else None
        if fn is None:
            fn = getattr(step, name, None)
        if fn is not None:
            out.append(fn)
    return out


def chain(steps: list[Any], kind: str, terminal: Callable[[CallContext], Any], is_async: bool,
          server: Any) -> Callable[[CallContext], Any]:
    """``hook(ctx, next)`` for each hook of each step, outermost first, and finally ``terminal``.

    A step with a ``check(ctx)`` method is a guard: it only refuses (raises) or lets the call
    pass, so consecutive guards run in one link, one after the other (the policy's gates,
    limits and the scope check are guards). In an async chain a guard's ``check_async`` is
    awaited instead when its ``may_wait(server)`` says the check may wait on a shared store (the
    rate limit, whose buckets then live in Redis); otherwise it costs no coroutine.

    In an async chain ``call_next`` returns an awaitable: an ``async def`` hook gets one it can
    always await; a step that only passes the request on (``passes_through``, as the policy's
    steps do) is linked as it is; any other sync hook runs on a worker thread with a
    ``call_next`` that waits for the rest of the chain, so it sees results as in a sync chain.
    """
    run = terminal
    guards: list[Callable[[CallContext], Any]] = []
    for step in reversed(steps):
        check = getattr(step, "check", None)
        if check is not None:
            waits = getattr(step, "check_async", None) if is_async else None
            if waits is None or not step.may_wait(server):
                guards.insert(0, check)
                continue
            # a guard that may wait on a shared store (the rate limit): awaited in an async
            # chain, so the event loop serves the other requests meanwhile
            if guards:
                run, guards = _guarded(guards, run), []
            run = _awaited_guard(waits, run)
            continue
        if guards:
            run, guards = _guarded(guards, run), []
        for hook in reversed(hooks_of(step, kind, is_async)):
            if not is_async or getattr(step, "passes_through", False):
                run = _link(hook, run)
            elif inspect.iscoroutinefunction(hook):
                run = _link(hook, _awaitable(run))
            else:
                run = _threaded(hook, run, server)
    if guards:
        run = _guarded(guards, run)
    return run


def _guarded(checks: list[Callable[[CallContext], Any]], call_next: CallNext) -> CallNext:
    if len(checks) == 1:
        check = checks[0]

        def one(ctx: CallContext) -> Any:
            check(ctx)
            return call_next(ctx)

        return one
    if len(checks) == 2:
        first, second = checks

        def two(ctx: CallContext) -> Any:
            first(ctx)
            second(ctx)
            return call_next(ctx)

        return two
    checks = tuple(checks)  # type: ignore[assignment]

    def several(ctx: CallContext) -> Any:
        for check in checks:
            check(ctx)
        return call_next(ctx)

    return several


def _awaited_guard(check: Callable[[CallContext], Awaitable[None]], call_next: CallNext) -> CallNext:
    async def guarded(ctx: CallContext) -> Any:
        await check(ctx)
        out = call_next(ctx)
        if inspect.isawaitable(out):
            return await out
        return out

    return guarded


def _link(hook: Callable[..., Any], call_next: CallNext) -> CallNext:
    def step(ctx: CallContext) -> Any:
        return hook(ctx, call_next)

    return step


def _awaitable(fn: CallNext) -> Callable[[CallContext], Awaitable[Any]]:
    async def call(ctx: CallContext) -> Any:
        out = fn(ctx)
        if inspect.isawaitable(out):
            return await out
        return out

    return call


def _threaded(hook: Callable[..., Any], call_next: CallNext, server: Any) -> CallNext:
    """A sync hook in an async chain: on a worker, its ``call_next`` blocks for the result."""
    import asyncio

    async def step(ctx: CallContext) -> Any:
        loop = asyncio.get_running_loop()

        def blocking_next(c: CallContext) -> Any:
            out = call_next(c)
            if inspect.isawaitable(out):
                return asyncio.run_coroutine_threadsafe(_await(out), loop).result()
            return out

        return await in_worker(server, lambda: hook(ctx, blocking_next))

    return step


async def _await(awaitable: Any) -> Any:
    return await awaitable


def any_async(steps: list[Any], kind: str) -> bool:
    """Whether a step has an ``async def`` hook for ``kind`` (the policy's ``_async`` variants
    are alternatives, not reasons to go async)."""
    return any(inspect.iscoroutinefunction(h) for s in steps for h in hooks_of(s, kind, False))


def waits_on_store(steps: list[Any], server: Any) -> bool:
    """Whether a guard of ``steps`` may wait on a shared store (a rate limit whose buckets live
    in Redis): its pipe is then async, so the guard's ``check_async`` waits on the stores'
    threads and a sync handler gets a worker only once it passed. In a sync pipe the guard would
    wait on the worker that runs the call, holding a worker of the caller's share for as long as
    the store takes, and the caller's other sync calls behind it."""
    return any(getattr(s, "check_async", None) is not None and s.may_wait(server) for s in steps)


def steps_for(server: Any, kind: str, item: Any) -> list[Any]:
    """The steps of ``item`` for ``kind``, in order: the policy layer's (when the server has a
    policy or the item settings of its own), those a transport installed, the user's middleware."""
    steps: list[Any] = []
    policed = server._policy is not None or getattr(item, "options", None) is not None or \
        getattr(item, "actions", None) is not None
    layer = layer_of(server) if policed else None
    if layer is not None:
        steps.extend(layer.steps(server, kind, item))
    own = len(steps)
    steps.extend(s for s in server._installed.values() if _applies(s, kind, item))
    steps.extend(m for m in server._middleware if _applies(m, kind, item) and hooks_of(m, kind, False))
    steps.sort(key=lambda s: getattr(s, "order", MIDDLEWARE_ORDER))  # stable: ties keep their order
    if layer is not None and len(steps) == own and own > 1:
        # nothing but the policy's own steps: it may run them as one (the same rules, one hook)
        return layer.fuse(server, kind, item, steps)
    return steps


async def in_worker(server: Any, fn: Callable[[], Any]) -> Any:
    """Run a blocking ``fn`` on a worker thread from async code, so the event loop never waits.
    It runs in a copy of the caller's context, as ``asyncio.to_thread`` does: what the steps
    before it set (the active sandbox, a mount's calling call, a trace span, the correlation
    id) holds there, and in what it hands back to the loop (``_threaded``)."""
    import asyncio

    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def settle(result: Any, exc: BaseException | None) -> None:
        if not fut.done():
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)

    server.workers.submit(partial_run(contextvars.copy_context(), fn),
                          lambda result, exc: loop.call_soon_threadsafe(settle, result, exc))
    return await fut
