"""The policy's steps in the request pipeline (server/pipeline.py): one class per feature.

    outcome (errors -> results, audit, shaping, correlation id)   order 0
    action (a manager tool's action and its own settings)          order 5
    gate, bridges                                                  order 20
    rate limit                                                     order 30
    argument size                                                  order 35
    timeout                                                        order 45
    (user middleware)                                              order 50
    sandbox binding                                                order 70
    contract (the envelope)                                        order 90

policy/layer.py picks, once per item, the steps whose feature applies to it; what each step
enforces was resolved once per (tool, policy) into a _Settings, read from ``ctx.settings`` at
call time. Calls made from inside a tool (``ctx.call_tool``), a manager's actions and tasks
take the same pipeline, so nothing a step refuses can be reached sideways (TL-11).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any

from ..protocol.errors import (
    E_INTERNAL,
    E_NOT_CONNECTED,
    E_NOT_FOUND,
    E_PERMISSION_DENIED,
    E_SCHEMA_VALIDATION,
    E_TIMEOUT,
    E_UNSUPPORTED,
    INVALID_PARAMS,
    McpError,
    PromptNotFound,
    ResourceNotFound,
    ToolError,
)
from ..server.observer import current_trace_ids
from ..server.context import ClientCapabilityError, ClientRequestError, ClientTimeoutError
from ..server.pipeline import CID_META_KEY, CORRELATION_ID, ERROR_META_KEY, CallContext, CallNext
from ..server.schema import _to_json
from ..server.session import caller_of, new_correlation_id
from ..server.tools import OutputSchemaError, shape_for_revision
from . import envelope, isolation, limits
from .config import INHERIT
from .paths import ACTIVE_SANDBOX

if TYPE_CHECKING:
    from ..server.tools import Tool

__all__ = ["CID_META_KEY", "CORRELATION_ID", "ERROR_META_KEY", "CorrelationFilter", "guard_logs", "settings_of"]

log = logging.getLogger("mcpkit")

_DEADLINES: Any = None
#: any character strip_control would remove (limits.py); absent in nearly every text
_CONTROL = limits._ANY_CONTROL


def _deadlines() -> Any:
    global _DEADLINES
    if _DEADLINES is None:
        from .deadlines import Deadlines

        _DEADLINES = Deadlines()
    return _DEADLINES


class CorrelationFilter(logging.Filter):
    """Adds ``record.correlation_id`` (and, when OpenTelemetry traces the call,
    ``record.trace_id`` and ``record.span_id``) and names them in the message of every log line
    written while a tool call runs, so each line can be joined with the call's audit line and
    its trace."""

    def filter(self, record: logging.LogRecord) -> bool:
        cid = CORRELATION_ID.get()
        record.correlation_id = cid
        ids = current_trace_ids()
        record.trace_id, record.span_id = ids if ids is not None else (None, None)
        if cid is not None and not getattr(record, "_mcpkit_cid", False):
            record._mcpkit_cid = True
            message = record.getMessage()
            if cid not in message:
                suffix = f"correlation id {cid}" + (f", trace {ids[0]}" if ids is not None else "")
                record.msg = f"{message} [{suffix}]"
                record.args = None
        return True


def guard_logs(*, redact: bool) -> None:
    """Correlation ids (and, with ``redact``, secret redaction) on the ``mcpkit`` logger's and
    the root logger's handlers: every line written while a call runs names the call, and no
    line carries a credential (stderr is where a stdio server's logs go)."""
    loggers = [logging.getLogger("mcpkit"), logging.getLogger()]
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, CorrelationFilter) for f in handler.filters):
                handler.addFilter(CorrelationFilter())
    if redact:
        from .redact import install_log_redaction

        install_log_redaction("mcpkit")


class _Settings:
    """What the policy means for one tool (or one action of a manager tool), resolved once per
    (tool, policy) rather than on every call: the steps read attributes instead of merging options."""

    __slots__ = ("policy", "contract", "sanitize", "max_argument_bytes", "max_result_bytes", "timeout",
                 "limiter", "rate", "rate_key", "rate_name", "gate_refusal", "bridges", "scopes", "audit",
                 "record_call", "isolated", "actions", "generation")

    def __init__(self, server: Any, tool: Any, action: Any = None, parent: _Settings | None = None) -> None:
        policy = self.policy = server._policy
        #: the registry as it was: an action takes its twin's options, scopes and isolation
        self.generation = server._generation
        opts = tool.options
        #: the bucket's key, and the name a refusal gives
        self.rate_key = self.rate_name = tool.name
        self.scopes: tuple[str, ...] = ()
        if action is not None:
            # 13.12: an action is limited, timed out and size-capped as itself: its own options,
            # else those of the tool registered with the same function (and that tool's rate
            # bucket and scopes: one limit, whichever way the function is reached)
            own = getattr(action, "options", None)
            twin = _twin(server, action)
            if own is not None:
                # a bucket of its own, under a key no tool can have: tool names never hold "/"
                # (TL-06), while a tool named "files.move" would share the bucket of action
                # "move" of "files", and refill it at its own (higher) rate
                opts, self.rate_key, self.rate_name = own, f"{tool.name}/{action.name}", f"{tool.name}.{action.name}"
            elif twin is not None and twin.options is not None:
                opts, self.rate_key = twin.options, twin.name
                self.rate_name = twin.name
            if twin is not None:
                self.scopes = tuple(twin.scopes)
        limits_ = policy.limits if policy is not None else None

        def pick(name: str, server_value: Any) -> Any:
            if parent is not None:
                server_value = getattr(parent, name)  # an action inherits its manager's
            value = getattr(opts, name, INHERIT) if opts is not None else INHERIT
            value = server_value if value is INHERIT else value
            return None if value is False else value

        #: the envelope shape (envelope.shape_of): None, "v1" or "legacy"
        self.contract = envelope.shape_of(pick("contract", policy.contract if policy is not None else False))
        if action is not None and parent is not None:
            self.contract = parent.contract  # one tool, one advertised outputSchema
        self.sanitize = bool(pick("sanitize", limits_.sanitize if limits_ is not None else False))
        self.max_argument_bytes = pick("max_argument_bytes", getattr(limits_, "max_argument_bytes", None))
        self.max_result_bytes = pick("max_result_bytes", getattr(limits_, "max_result_bytes", None))
        self.timeout = pick("timeout", getattr(limits_, "timeout", None))
        own_rate = opts.rate_limit if opts is not None else INHERIT
        self.limiter: Any = None
        self.rate: Any = None
        if own_rate is INHERIT:
            self.limiter = policy.rate_limiter if policy is not None else None
            if action is not None and parent is not None:
                self.rate_key, self.rate_name = parent.rate_key, parent.rate_name  # metered as the manager tool
        elif own_rate not in (None, False):
            self.limiter = policy.rate_limiter if policy is not None and policy.rate_limiter is not None \
                else tool_limiter(server)
            self.rate = own_rate
        gates = policy.gates if policy is not None else None
        ann = action.annotations if action is not None else tool.annotations
        self.gate_refusal = gates.refusal(ann) if gates is not None and (
            action is not None or tool.actions is None) else None
        self.bridges = opts.requires if opts is not None else ()
        if parent is not None:
            self.bridges = tuple(dict.fromkeys([*parent.bridges, *self.bridges]))
        self.audit = policy.audit if policy is not None else None
        #: the audit sink's fast entry point, when it has one (AuditLog.record_call)
        self.record_call = getattr(self.audit, "record_call", None)
        #: the targets (None: the tool, else action names) run in worker processes, or None
        self.isolated = isolation.isolated_targets(server, tool) if parent is None else parent.isolated
        self.actions: dict[str, _Settings] = {}
        if action is None and tool.actions is not None:
            for name, act in tool.actions.items():
                self.actions[name] = _Settings(server, tool, act, self)

    def all(self) -> list[_Settings]:
        return [self, *self.actions.values()]


def _twin(server: Any, action: Any) -> Any:
    """The plain tool registered with the same function as ``action``, if any."""
    for tool in server._tools.values():
        if tool.handler is action.handler and tool.actions is None:
            return tool
    return None


def tool_limiter(server: Any) -> Any:
    """The rate limiter of per-tool limits on a server without a policy-wide one."""
    if server._tool_limiter is None:
        from .ratelimit import RateLimiter

        server._tool_limiter = RateLimiter(store=server.stores.rates if server.shared else None)
    return server._tool_limiter


def settings_of(server: Any, tool: Tool) -> _Settings:
    resolved = tool.resolved
    # a manager tool's actions read other tools (their twins: options, scopes, isolation), so a
    # change of the registry (a twin added, replaced or removed, an action added) resolves it
    # again, as does an action added to the child of an include (its copy shares the actions)
    if resolved is None or resolved.policy is not server._policy or (
            tool.actions is not None and (resolved.generation != server._generation
                                          or len(resolved.actions) != len(tool.actions))):
        resolved = tool.resolved = _Settings(server, tool)
    return resolved  # type: ignore[no-any-return]


# -------------------------------------------------------------------------- outcome and audit


def _ms(cc: CallContext) -> float:
    return (time.perf_counter() - cc.start) * 1000.0


def _audit(cc: CallContext, outcome: str, code: str | None) -> None:
    settings = cc.settings
    audit = settings.audit
    if audit is None:
        return
    tool = cc.item
    # fields a step adds to this call's line (bridge/enginepath.py: the engine paths and the
    # real paths they resolved to), which the fixed fields of the fast path have no room for
    extra = cc._state.get("audit") if cc._state is not None else None
    try:
        record_call = settings.record_call
        if record_call is not None and not extra:
            # the duration is rounded when the line is written, off the call's path
            record_call(cc._cid, cc.caller, tool.name, cc.action, cc.arguments, outcome, code,
                        (time.perf_counter() - cc.start) * 1000.0, cc.parent, current_trace_ids())
            return
        entry: dict[str, Any] = {
            "correlationId": cc._cid,
            "principal": cc.caller,
            "tool": tool.name,
            "action": cc.action,
            "arguments": cc.arguments,
            "outcome": outcome,
            "code": code,
            "durationMs": round(_ms(cc), 3),
        }
        if cc.parent is not None:
            entry["parentCorrelationId"] = cc.parent
        if extra:
            entry.update((k, v) for k, v in extra.items() if k not in entry)
        ids = current_trace_ids()
        if ids is not None:
            entry["traceId"], entry["spanId"] = ids
        audit.record(entry)
    except Exception:  # noqa: BLE001 - a full disk must not turn every call into an error
        log.exception("could not write the audit line of tool %r [correlation id %s]", tool.name, cc._cid)


def _finish(cc: CallContext, result: dict[str, Any], owned: bool = False) -> dict[str, Any]:
    """Sanitize, truncate, shape for the revision, and name the correlation id. ``owned``:
    ``result`` was built by a step of this call and may be completed in place."""
    rev = cc.request.revision
    settings = cc.settings
    # The envelope this call built, as it was built (no middleware between could have changed
    # it): one text block, the JSON of structuredContent. What that text says holds for both.
    mirror = None
    if owned and settings.contract and not cc.session.server._rewriters:
        content = result["content"]
        if len(content) == 1 and "_meta" not in result:
            mirror = content[0]["text"]
    if settings.sanitize:
        if mirror is not None and envelope.clean_json(mirror):
            pass  # the common case: its JSON is clean, so both copies of the envelope are
        else:
            mirror = None
            if "structuredContent" in result:
                result = envelope.sanitized(result, settings.contract)
            content = result.get("content")
            if not (type(content) is list and len(content) == 1 and content[0].get("type") == "text"
                    and _CONTROL.search(content[0].get("text", "")) is None):  # the common case, inline
                result = limits.sanitize_result(result)
    cap = settings.max_result_bytes
    # ... and its size is at most 10 bytes a character of that text (once as JSON of up to 4
    # bytes a character, once as a JSON string of up to 6), plus the keys around them
    if cap and (mirror is None or len(mirror) * 10 + 64 > cap):
        result = limits.truncate_result(result, cap)
    if rev.downgrades:
        result = shape_for_revision(result, rev)
    meta = result.get("_meta")
    if meta is None:
        if owned:
            result["_meta"] = {CID_META_KEY: cc._cid}
            return result
        return {**result, "_meta": {CID_META_KEY: cc._cid}}
    return {**result, "_meta": {**meta, CID_META_KEY: cc._cid}}


def as_tool_error(cc: CallContext, exc: BaseException) -> ToolError:
    """One error taxonomy: what a failure means for the caller; internals stay in the log."""
    name = cc.item.name if cc.action is None else f"{cc.item.name}.{cc.action}"
    if isinstance(exc, ToolError):
        if not exc.message:
            exc.message = f"Tool {name!r} failed."
        return exc
    if isinstance(exc, ClientCapabilityError):
        return ToolError(str(exc), code=E_UNSUPPORTED)
    if isinstance(exc, ClientTimeoutError):
        return ToolError(str(exc), code=E_TIMEOUT)
    if isinstance(exc, ClientRequestError):
        return ToolError(str(exc), code=E_INTERNAL)
    if isinstance(exc, (ResourceNotFound, PromptNotFound)):  # raised by shared code a tool calls
        return ToolError(exc.message, code=E_NOT_FOUND,
                         details={"uri": exc.uri} if isinstance(exc, ResourceNotFound) else {"name": exc.name})
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"{name}: no such file or directory.", code=E_NOT_FOUND)
    if isinstance(exc, PermissionError):
        return ToolError(f"{name}: permission denied by the operating system.", code=E_PERMISSION_DENIED)
    if isinstance(exc, OSError) and not cc.ran:
        # a path that changed while it was being checked (13.20): refused, never half-bound
        return ToolError(f"{name}: a path argument could not be checked ({exc.strerror or exc}).",
                         code=E_PERMISSION_DENIED, suggested_fix="Retry; the file system changed during the call.")
    if isinstance(exc, NotImplementedError):
        return ToolError(f"{name} is not supported here.", code=E_UNSUPPORTED)
    if isinstance(exc, OutputSchemaError):
        log.error("tool %r: %s [correlation id %s]", name, exc, cc.correlation_id)
        return ToolError(f"Tool {name!r} produced output that does not match its outputSchema "
                         f"(correlation id {cc.correlation_id}).", code=E_INTERNAL)
    log.error("tool %r raised [correlation id %s]", name, cc.correlation_id, exc_info=exc)
    return ToolError(f"Internal error while running tool {name!r} (correlation id {cc.correlation_id}).",
                     code=E_INTERNAL)


def fail(cc: CallContext, exc: BaseException, outcome: str | None = None) -> dict[str, Any]:
    """The answer to a failed call, audited: the envelope's failure, or isError with the error in _meta."""
    error = as_tool_error(cc, exc)
    _audit(cc, outcome or ("error" if cc.ran else "denied"), error.code)
    if cc.settings.contract:
        result = envelope.failure(cc.item.name, cc.action, cc.correlation_id, _ms(cc), error, _report(cc))
    else:
        text = error.message
        if error.suggested_fix:
            text += f" Fix: {error.suggested_fix}"
        result = {"content": [{"type": "text", "text": text}], "isError": True,
                  "_meta": {ERROR_META_KEY: error.to_error()}}
    return _finish(cc, result)


def _done(cc: CallContext, result: Any) -> Any:
    state = cc._state
    if result is None:
        if state is not None and state.get("cancelled"):
            _audit(cc, "cancelled", None)  # the client forgot the request: no answer goes out
        return None  # or the deadline answered the call already (Timeout)
    if state:
        # a task's call ends here too (server/tool_tasks.py run_as_task): audited and shaped as any
        if state.get("answered"):
            return result  # 2026-07-28 InputRequiredResult: the call goes on in a later round
    if result.get("isError") is True:  # a ToolResult(is_error=True) or a raw isError dict
        _audit(cc, "error", envelope.E_TOOL_FAILED)
    else:
        _audit(cc, "ok", None)
    return _finish(cc, result, result is cc.made)


def _mcp_failed(cc: CallContext, exc: McpError) -> None:
    if getattr(cc.item, "handler", None) is None:  # a tool that does not exist (TL-10)
        _audit(cc, "denied", E_NOT_FOUND)
        return
    _audit(cc, "error" if cc.ran else "denied",
           E_SCHEMA_VALIDATION if exc.code == INVALID_PARAMS and not cc.ran else None)


def _begin(cc: CallContext) -> None:
    """What every later step reads: the settings, who calls, the correlation id, the start."""
    settings = cc.settings = settings_of(cc.session.server, cc.item)
    policy = settings.policy
    cc.caller = policy.principal_of(cc.session, cc.request) if policy is not None else (
        caller_of(cc.session))
    if cc._cid is None:
        cc._cid = new_correlation_id()
    cc.start = time.perf_counter()


class Outcome:
    """Outermost: any failure becomes the caller's answer (and one audit line, whatever failed:
    a refusal, a binding error, the handler, a deadline), and results are shaped."""

    order = 0
    passes_through = True  # its sync hook only passes call_next on (or has an _async variant)
    outcome = True

    def on_call_tool(self, cc: CallContext, call_next: CallNext) -> Any:
        # _begin, inline: this runs on every policed call
        settings = cc.settings = settings_of(cc.session.server, cc.item)
        policy = settings.policy
        cc.caller = policy.principal_of(cc.session, cc.request) if policy is not None else (
            caller_of(cc.session))
        if cc._cid is None:
            cc._cid = new_correlation_id()
        cc.start = time.perf_counter()
        try:
            result = call_next(cc)
        except McpError as exc:
            _mcp_failed(cc, exc)
            raise
        except Exception as exc:  # noqa: BLE001
            return fail(cc, exc)
        return _done(cc, result)

    async def on_call_tool_async(self, cc: CallContext, call_next: CallNext) -> Any:
        _begin(cc)
        try:
            result = call_next(cc)
            if inspect.isawaitable(result):
                result = await result
        except McpError as exc:
            _mcp_failed(cc, exc)
            raise
        except asyncio.CancelledError:
            _audit(cc, "cancelled", None)
            raise
        except Exception as exc:  # noqa: BLE001
            return fail(cc, exc)
        return _done(cc, result)


# -------------------------------------------------------------------------- admission


class ActionStep:
    """A manager tool's call runs one action: the action is chosen from the arguments, and
    from here on the call is enforced with the action's own settings (13.12)."""

    order = 5

    def check(self, cc: CallContext) -> None:
        tool = cc.item
        if not tool.permitted:
            raise ToolError(f"Tool {tool.name!r} is not available: none of its actions is permitted.",
                            code=E_PERMISSION_DENIED, details={"tool": tool.name},
                            suggested_fix="Ask the operator to enable the actions this tool needs.")
        act = tool.target(cc.arguments) if isinstance(cc.arguments, dict) else None
        if act is None and not tool.visible:
            # TL-13: nothing is offered because bridges are down, not because anything is
            # refused: the bridge's retryable error, as requires= on the whole tool gives
            down = tool.down_bridge()
            if down is not None:
                raise down.not_connected_error()
        if act is not None:
            cc.action = act.name
            cc.target = act
            settings = cc.settings = cc.settings.actions[act.name]
            if settings.gate_refusal is not None:
                raise ToolError(f"Action {act.name!r} of tool {tool.name!r} is not available: "
                                f"{settings.gate_refusal}.",
                                code=E_PERMISSION_DENIED, details={"tool": tool.name, "action": act.name},
                                suggested_fix="Use another action, or ask the operator to enable it.")
            if settings.scopes:
                cc.scopes = tuple(dict.fromkeys([*cc.scopes, *settings.scopes]))


class GateStep:
    order = 20

    def check(self, cc: CallContext) -> None:
        refusal = cc.settings.gate_refusal
        if refusal is not None and cc.action is None:
            name = cc.item.name
            raise ToolError(f"Tool {name!r} is not available: {refusal}.",
                            code=E_PERMISSION_DENIED, details={"tool": name},
                            suggested_fix="Use another tool, or ask the operator to enable this one.")


class BridgeStep:
    order = 21

    def check(self, cc: CallContext) -> None:
        for bridge in cc.settings.bridges:
            if not bridge.up:
                raise bridge.not_connected_error()  # E_NOT_CONNECTED, retryable


class RateLimitStep:
    order = 30

    def check(self, cc: CallContext) -> None:
        settings = cc.settings
        limiter = settings.limiter
        if limiter is not None:
            _metered(cc, settings, limiter)

    @staticmethod
    def may_wait(server: Any) -> bool:
        """Whether the bucket may live in a shared store (then ``check_async`` is awaited)."""
        return bool(server.shared)

    async def check_async(self, cc: CallContext) -> None:
        """``check`` in an async chain: a bucket in the shared store (Redis) is taken from on
        the stores' threads, so a slow or paused Redis stalls this call, not the event loop."""
        settings = cc.settings
        limiter = settings.limiter
        if limiter is None:
            return
        server = cc.session.server
        if server.shared and limiter.store is server.stores.rates:
            await server.stores.call(_metered, cc, settings, limiter)
        else:
            _metered(cc, settings, limiter)  # a bucket in this process never waits


def _metered(cc: CallContext, settings: _Settings, limiter: Any) -> None:
    """One call taken from the caller's bucket of the tool, or E_RATE_LIMITED."""
    name = settings.rate_key
    try:
        wait = limiter.check(cc.caller, name, settings.rate)
    except Exception as exc:  # noqa: BLE001 - a shared store that is down (StoreUnavailable)
        name = settings.rate_name
        log.warning("rate limit of tool %r not checked: %s [correlation id %s]", name, exc, cc.correlation_id)
        raise ToolError(f"Tool {name!r} cannot run now: its rate limit cannot be checked.",
                        code=E_NOT_CONNECTED, retryable=True,
                        suggested_fix="Retry in a few seconds.") from None
    if wait is not None:
        raise limiter.limit_error(settings.rate_name, wait, settings.rate or limiter.default)


class ArgumentSizeStep:
    order = 35

    def check(self, cc: CallContext) -> None:
        cap = cc.settings.max_argument_bytes
        if cap:
            limits.check_argument_size(cc.arguments, cap, cc.item.name if cc.action is None
                                       else f"{cc.item.name}.{cc.action}")


class IsolationStep:
    """``isolation="process"``: the handler (or the action, as itself) runs in a worker process
    that is killed at the call's deadline (policy/isolation.py); run_tool hands it over."""

    order = 40

    def check(self, cc: CallContext) -> None:
        isolated = cc.settings.isolated
        if isolated is not None and cc.action in isolated:
            cc.runner = isolation.call


# -------------------------------------------------------------------------- around the handler


def _timeout_error(cc: CallContext, timeout: float) -> ToolError:
    name = cc.item.name if cc.action is None else f"{cc.item.name}.{cc.action}"
    return ToolError(
        f"Tool {name!r} did not finish within {timeout:g} s and was stopped.",
        code=E_TIMEOUT,
        details={"timeoutMs": int(timeout * 1000)},
        suggested_fix="Retry with a smaller request, or later if the system is busy.",
    )


class TimeoutStep:
    """A call that outlives its deadline is answered E_TIMEOUT. A sync handler cannot be
    stopped from outside: the timer answers the request and whatever the handler returns
    later is dropped; an async handler's task is cancelled."""

    order = 45
    passes_through = True  # its sync hook only passes call_next on (or has an _async variant)

    def on_call_tool(self, cc: CallContext, call_next: CallNext) -> Any:
        timeout = cc.settings.timeout
        if not timeout or cc.nested or cc.runner is not None:
            return call_next(cc)  # an isolated call's worker is killed at its deadline instead
        deadlines = _deadlines()
        deadline = deadlines.add(timeout, lambda: _expire(cc, timeout))
        try:
            result = call_next(cc)
        except BaseException:
            if not deadlines.cancel(deadline):
                return None  # answered already: the failure came too late to matter
            raise
        if not deadlines.cancel(deadline):
            return None
        return result

    async def on_call_tool_async(self, cc: CallContext, call_next: CallNext) -> Any:
        timeout = cc.settings.timeout
        out = call_next(cc)
        if not inspect.isawaitable(out):
            return out
        if not timeout or cc.runner is not None:
            return await out
        task = asyncio.ensure_future(out)
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:
            task.cancel()  # the client cancelled the call: the handler stops too
            raise
        if not done:
            task.cancel()  # the handler's task is cancelled, then the call answered E_TIMEOUT
            if cc.handler_context is not None:
                cc.handler_context.cancelled.set()
            await asyncio.wait({task}, timeout=1.0)
            raise _timeout_error(cc, timeout)
        return task.result()


def _expire(cc: CallContext, timeout: float) -> None:
    """The deadline of a sync call passed (on the timer thread, which won the race with the
    handler): answer E_TIMEOUT now and ask the handler to stop."""
    if cc.handler_context is not None:
        cc.handler_context.cancelled.set()  # a cooperative handler polls this and stops
    result = fail(cc, _timeout_error(cc, timeout))
    task = cc.task
    if task is not None:  # the request was answered with the task: the deadline settles the task
        task[0].settle(task[1], result, None)
        return
    cc.session._finish(cc.request.id, result, None, "tools/call", flush=True)


class SandboxStep:
    """Checking parameter types (SandboxPath) are bound inside the policy's sandbox, for
    tools, resource templates and prompts alike (13.10)."""

    order = 70
    passes_through = True  # its sync hook only passes call_next on (or has an _async variant)

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    def on_request(self, cc: CallContext, call_next: CallNext) -> Any:
        token = ACTIVE_SANDBOX.set(self.sandbox)
        try:
            return call_next(cc)  # binding happens synchronously inside, before any await
        finally:
            ACTIVE_SANDBOX.reset(token)


class ContractStep:
    """The tool contract: the handler's own value, checked and wrapped in the envelope."""

    order = 90
    passes_through = True  # its sync hook only passes call_next on (or has an _async variant)

    def on_call_tool(self, cc: CallContext, call_next: CallNext) -> Any:
        if not cc.settings.contract:
            return call_next(cc)
        cc.raw = True
        _collect(cc)
        value = call_next(cc)
        if cc._state is not None and _settled_elsewhere(cc):
            return value
        return _envelope(cc, value)

    async def on_call_tool_async(self, cc: CallContext, call_next: CallNext) -> Any:
        if not cc.settings.contract:
            return call_next(cc)
        cc.raw = True
        _collect(cc)
        value = call_next(cc)
        if inspect.isawaitable(value):
            value = await value
        return value if _settled_elsewhere(cc) else _envelope(cc, value)


def _collect(cc: CallContext) -> None:
    """A legacy-shape call collects what its handler logs and adds through ctx (envelope.Report):
    the handler's Context records into ``cc.report`` (server/terminals.py run_tool)."""
    if cc.settings.contract == "legacy" and cc.report is None:
        policy = cc.settings.policy
        cc.report = envelope.Report(redact=policy is not None and policy.redact_logs)


def _report(cc: CallContext) -> envelope.Report | None:
    """The legacy fields of this call's envelope; None for the v1 shape."""
    if cc.settings.contract != "legacy":
        return None
    if cc.report is None:  # refused before the contract step ran (a gate, a rate limit)
        cc.report = envelope.Report()
    return cc.report


def _settled_elsewhere(cc: CallContext) -> bool:
    """The call asks the client for input first: no envelope yet."""
    state = cc._state
    return bool(state) and bool(state.get("answered"))


_NUMBERS = frozenset({int, float, bool})


def _a_number(structured: Any) -> bool:
    """A number, or the ``{"result": number}`` a tool's scalar is wrapped in (TL-08): nothing
    in it to sanitize, nothing near a size limit."""
    kind = type(structured)
    return kind in _NUMBERS or (kind is dict and len(structured) == 1 and type(structured.get("result")) in _NUMBERS)


def _envelope(cc: CallContext, value: Any) -> dict[str, Any]:
    tool = cc.item
    report = _report(cc)
    if type(value) in envelope.PLAIN and cc.target is tool and report is None:
        # the common case, inline: the tool's own JSON value (what split() returns at once)
        value = tool.result_dump(value)
        tool.check_result(value)
        made = cc.made = envelope.success(tool.name, None, cc._cid, (time.perf_counter() - cc.start) * 1000.0,
                                          value, None)
        return made
    summary = None
    if isinstance(value, envelope.Outcome):
        summary, value = value.summary, value.result
    # content blocks (an image, a ToolResult) stay blocks beside the envelope
    was_content, value, blocks, meta, failed = envelope.split(value)
    if failed is not None:
        raise ToolError(failed, code=envelope.E_TOOL_FAILED)
    if cc.target is tool and not was_content:
        value = tool.result_dump(value)
        # the envelope is built here, valid by construction; the tool's own value is what
        # needs checking, against the result schema inside the advertised one
        tool.check_result(value)
    elif cc.target is tool and value is not None and not isinstance(value, str):
        tool.check_result(value)  # a ToolResult's structured value (TL-07)
    else:
        value = _to_json(value)  # an action's own value, as JSON
    made = cc.made = envelope.success(tool.name, cc.action, cc._cid, _ms(cc), value, summary, blocks, report)
    if meta:
        made["_meta"] = dict(meta)
    return made


# -------------------------------------------------------------------------- composed


class PolicedCall:
    """OUTCOME, GATE, RATE_LIMIT, ARGUMENT_SIZE, TIMEOUT and CONTRACT in one frame: what the
    policy's steps do, in their order, for a sync tool when nothing else sits among them (no
    user middleware, no installed step, no action, bridge, isolation or path binding; see
    layer.fuse). One hook runs instead of a chain of links and the settings are read once; the
    common answer (the tool's plain value in its envelope) is finished inline. Each rule is the
    same function the separate steps call, so both compositions answer and audit alike
    (tests/policy/test_policy_fused.py runs every case through both)."""

    order = 0
    passes_through = True
    outcome = True

    def on_call_tool(self, cc: CallContext, call_next: CallNext) -> Any:
        item = cc.item
        session = cc.session
        server = session.server
        settings = cc.settings = settings_of(server, item)
        policy = settings.policy
        cc.caller = policy.principal_of(session, cc.request) if policy is not None else (
            caller_of(session))
        if cc._cid is None:
            cc._cid = new_correlation_id()
        cc.start = time.perf_counter()
        deadline = None
        try:
            if settings.gate_refusal is not None:
                GATE.check(cc)
            limiter = settings.limiter
            if limiter is not None:
                _metered(cc, settings, limiter)
            cap = settings.max_argument_bytes
            if cap:
                limits.check_argument_size(cc.arguments, cap, item.name)
            timeout = settings.timeout
            if timeout and not cc.nested:
                deadlines = _deadlines()
                deadline = deadlines.add(timeout, lambda: _expire(cc, timeout))
            cc.raw = True  # the handler's own value: shaped here, so the common answer is finished inline
            if settings.contract == "legacy":
                _collect(cc)
            value = call_next(cc)
            if cc._state is not None and _settled_elsewhere(cc):
                result = value
            elif settings.contract:
                result = _envelope(cc, value)
            else:
                result = item.to_result(value)
                if type(value) in _NUMBERS and _a_number(result.get("structuredContent", 0)):
                    cc.made = result  # one text block, a number's JSON: built just now, as an envelope is
        except BaseException as exc:
            if deadline is not None and not deadlines.cancel(deadline):
                return _done(cc, None)  # answered already: the failure came too late to matter
            if isinstance(exc, McpError):
                _mcp_failed(cc, exc)
                raise
            if isinstance(exc, Exception):
                return fail(cc, exc)
            raise
        if deadline is not None and not deadlines.cancel(deadline):
            return _done(cc, None)  # the deadline answered the call already (E_TIMEOUT)
        made = cc.made
        if result is not made or cc._state is not None or server._rewriters or len(made["content"]) != 1 \
                or "_meta" in made:
            return _done(cc, result)
        # _done and _finish for the answer built just above, which nothing else has touched: one
        # text block, the JSON of structuredContent, no _meta
        _audit(cc, "ok", None)
        mirror = made["content"][0]["text"]
        cap = settings.max_result_bytes
        if cap and len(mirror) * 10 + 64 > cap:
            return _finish(cc, made, True)  # which scans the text itself: once is enough
        if settings.sanitize and not envelope.clean_json(mirror):
            return _finish(cc, made, True)
        rev = cc.request.revision
        if rev.downgrades:
            made = shape_for_revision(made, rev)
        made["_meta"] = {CID_META_KEY: cc._cid}
        return made



OUTCOME = Outcome()
ACTION = ActionStep()
GATE = GateStep()
BRIDGES = BridgeStep()
RATE_LIMIT = RateLimitStep()
ARGUMENT_SIZE = ArgumentSizeStep()
ISOLATION = IsolationStep()
TIMEOUT = TimeoutStep()
CONTRACT = ContractStep()
POLICED_CALL = PolicedCall()
#: the steps PolicedCall composes
FUSIBLE = frozenset({OUTCOME, GATE, RATE_LIMIT, ARGUMENT_SIZE, TIMEOUT, CONTRACT})
