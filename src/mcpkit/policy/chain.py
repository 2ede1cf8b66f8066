"""The call-time chain: every policy enforced in one place, in one order, for every tool call.

    admit (gates, bridges, rate limit, argument size) -> validate (the advertised schema)
    -> bind (sandbox paths) -> run (timeout) -> shape (envelope, sanitize, truncate)
    -> answer (correlation id in _meta) and audit (one line)

dispatch.call_tool sends a call here when the server has a policy, the tool has options of its
own, or the tool is a manager tool; plain tools on a plain server keep the short path. Calls
made from inside a tool (``ctx.call_tool``: batch and meta tools) go through the same chain, so
nothing a gate hides can be reached sideways (TL-11).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from functools import partial
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
from ..server.context import ClientCapabilityError, ClientRequestError, ClientTimeoutError, Context
from ..server.rounds import InputRequired
from ..server.schema import BindError, _identity, _to_json
from ..server.session import SyncCall, new_correlation_id
from ..server.tools import OutputSchemaError, shape_for_revision
from ..server.validation import format_errors
from . import envelope, isolation, limits
from .config import INHERIT
from .paths import ACTIVE_SANDBOX

if TYPE_CHECKING:
    from ..protocol.engine import RequestReceived
    from ..server.session import ServerSession
    from ..server.tools import Tool

__all__ = ["CID_META_KEY", "CORRELATION_ID", "ERROR_META_KEY", "CorrelationFilter", "call_nested", "call_tool",
           "guard_logs"]

log = logging.getLogger("mcpkit")

#: where a result names its correlation id, and (without the envelope) its error (MT-02 key format)
CID_META_KEY = "dev.mcpkit/correlationId"
ERROR_META_KEY = "dev.mcpkit/error"

#: the correlation id of the tool call running in this thread or task, for log lines about it
CORRELATION_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcpkit_cid", default=None)

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
    """Adds ``record.correlation_id`` and names it in the message of every log line written
    while a tool call runs, so each line can be joined with the call's audit line."""

    def filter(self, record: logging.LogRecord) -> bool:
        cid = CORRELATION_ID.get()
        record.correlation_id = cid
        if cid is not None and not getattr(record, "_mcpkit_cid", False):
            record._mcpkit_cid = True
            message = record.getMessage()
            if cid not in message:
                record.msg = f"{message} [correlation id {cid}]"
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
    """What the policy means for one tool, resolved once per (tool, policy) rather than on
    every call: the hot path reads attributes instead of merging options."""

    __slots__ = ("policy", "contract", "sanitize", "max_argument_bytes", "max_result_bytes", "timeout",
                 "limiter", "rate", "gate_refusal", "action_refusals", "bridges", "audit", "record_call",
                 "isolated")

    def __init__(self, server: Any, tool: Tool) -> None:
        policy = self.policy = server._policy
        opts = tool.options
        limits = policy.limits if policy is not None else None

        def pick(name: str, server_value: Any) -> Any:
            value = getattr(opts, name) if opts is not None else INHERIT
            value = server_value if value is INHERIT else value
            return None if value is False else value

        self.contract = bool(pick("contract", policy.contract if policy is not None else False))
        self.sanitize = bool(pick("sanitize", limits.sanitize if limits is not None else False))
        self.max_argument_bytes = pick("max_argument_bytes", getattr(limits, "max_argument_bytes", None))
        self.max_result_bytes = pick("max_result_bytes", getattr(limits, "max_result_bytes", None))
        self.timeout = pick("timeout", getattr(limits, "timeout", None))
        own = opts.rate_limit if opts is not None else INHERIT
        self.limiter: Any = None
        self.rate: Any = None
        if own is INHERIT:
            self.limiter = policy.rate_limiter if policy is not None else None
        elif own not in (None, False):
            self.limiter = policy.rate_limiter if policy is not None and policy.rate_limiter is not None \
                else server.tool_limiter()
            self.rate = own
        gates = policy.gates if policy is not None else None
        self.gate_refusal = gates.refusal(tool.annotations) if gates is not None and tool.actions is None else None
        self.action_refusals: dict[str, str | None] = {}
        if tool.actions is not None:
            for name, act in tool.actions.items():
                self.action_refusals[name] = gates.refusal(act.annotations) if gates is not None else None
        self.bridges = opts.requires if opts is not None else ()
        self.audit = policy.audit if policy is not None else None
        #: the audit sink's fast entry point, when it has one (AuditLog.record_call)
        self.record_call = getattr(self.audit, "record_call", None)
        #: the targets (None: the tool, else action names) run in worker processes, or None
        self.isolated = isolation.isolated_targets(server, tool)


def settings_of(server: Any, tool: Tool) -> _Settings:
    resolved = tool.resolved
    if resolved is None or resolved.policy is not server._policy or (
            tool.actions is not None and len(resolved.action_refusals) != len(tool.actions)):
        resolved = tool.resolved = _Settings(server, tool)
    return resolved  # type: ignore[no-any-return]


class _Call:
    """One tool call on its way through the chain."""

    __slots__ = (
        "session", "req", "tool", "policy", "settings", "target", "action", "cid", "parent", "principal",
        "arguments", "start", "contract", "ctx", "timeout",
    )

    def __init__(self, session: ServerSession, req: RequestReceived, tool: Tool, arguments: Any,
                 cid: str, parent: str | None) -> None:
        self.session = session
        self.req = req
        self.tool = tool
        server = session.server
        policy = self.policy = server._policy
        settings = self.settings = settings_of(server, tool)
        self.target: Any = tool
        self.action: str | None = None
        self.cid = cid
        self.parent = parent
        self.principal = policy.principal_of(session, req) if policy is not None else "anonymous"
        self.arguments = arguments
        self.start = time.perf_counter()
        self.contract = settings.contract
        self.ctx: Context | None = None
        self.timeout = settings.timeout  # a manager action may set its own (manager.admit_action)

    def expire(self) -> None:
        """The deadline of a sync call passed (on the timer thread, which won the race with the
        handler): answer E_TIMEOUT now and ask the handler to stop."""
        if self.ctx is not None:
            self.ctx.cancelled.set()  # a cooperative handler polls this and stops
        result = self.fail(_timeout_error(self, self.timeout))
        self.session._finish(self.req.id, result, None, "tools/call", flush=True)

    # ---------------------------------------------------------------- outcomes

    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000.0

    def audit(self, outcome: str, code: str | None, ms: float | None = None) -> None:
        audit = self.settings.audit
        if audit is None:
            return
        try:
            record_call = self.settings.record_call
            if record_call is not None:
                record_call(self.cid, self.principal, self.tool.name, self.action, self.arguments, outcome, code,
                            round(self.ms() if ms is None else ms, 3), self.parent)
                return
            entry: dict[str, Any] = {
                "correlationId": self.cid,
                "principal": self.principal,
                "tool": self.tool.name,
                "action": self.action,
                "arguments": self.arguments,
                "outcome": outcome,
                "code": code,
                "durationMs": round(self.ms(), 3),
            }
            if self.parent is not None:
                entry["parentCorrelationId"] = self.parent
            audit.record(entry)
        except Exception:  # noqa: BLE001 - a full disk must not turn every call into an error
            log.exception("could not write the audit line of tool %r [correlation id %s]", self.tool.name, self.cid)

    def finish(self, result: dict[str, Any], owned: bool = False) -> dict[str, Any]:
        """Sanitize, truncate, shape for the revision, and name the correlation id. ``owned``:
        ``result`` was built here and may be completed in place."""
        rev = self.req.revision
        settings = self.settings
        if settings.sanitize:
            if "structuredContent" in result:
                result = envelope.sanitized(result, self.contract)
            content = result.get("content")
            if not (type(content) is list and len(content) == 1 and content[0].get("type") == "text"
                    and _CONTROL.search(content[0].get("text", "")) is None):  # the common case, inline
                result = limits.sanitize_result(result)
        if settings.max_result_bytes:
            result = limits.truncate_result(result, settings.max_result_bytes)
        if rev.downgrades:
            result = shape_for_revision(result, rev)
        meta = result.get("_meta")
        if owned and meta is None:
            result["_meta"] = {CID_META_KEY: self.cid}
            return result
        meta = dict(meta or {})
        meta[CID_META_KEY] = self.cid
        return {**result, "_meta": meta}

    def succeed(self, value: Any) -> dict[str, Any]:
        tool = self.tool
        try:
            if self.contract:
                summary = None
                if isinstance(value, envelope.Outcome):
                    summary, value = value.summary, value.result
                # content blocks (an image, a ToolResult) stay blocks beside the envelope
                was_content, value, blocks, meta, failed = envelope.split(value)
                if failed is not None:
                    return self.fail(ToolError(failed, code=envelope.E_TOOL_FAILED))
                if self.target is tool and not was_content:
                    value = tool.result_dump(value)
                    # the envelope is built here, valid by construction; the tool's own value is
                    # what needs checking, against the result schema inside the advertised one
                    tool.check_result(value)
                elif self.target is tool and value is not None and not isinstance(value, str):
                    tool.check_result(value)  # a ToolResult's structured value (TL-07)
                else:
                    value = _to_json(value)  # an action's own value, as JSON
                ms = self.ms()
                result = envelope.success(tool.name, self.action, self.cid, ms, value, summary, blocks)
                if meta:
                    result["_meta"] = dict(meta)
                owned = True
            else:
                ms = None
                result = tool.to_result(value)
                owned = result is not value  # a raw tool may hand back its own dict
        except OutputSchemaError as exc:
            return self.fail(exc)
        except TypeError as exc:  # a value that has no JSON form
            return self.fail(exc)
        if result.get("isError") is True:  # a ToolResult(is_error=True) or a raw isError dict
            self.audit("error", envelope.E_TOOL_FAILED, ms)
        else:
            self.audit("ok", None, ms)
        return self.finish(result, owned)

    def fail(self, exc: BaseException, outcome: str = "error") -> dict[str, Any]:
        error = self.as_tool_error(exc)
        self.audit(outcome, error.code)
        if self.contract:
            result = envelope.failure(self.tool.name, self.action, self.cid, self.ms(), error)
        else:
            text = error.message
            if error.suggested_fix:
                text += f" Fix: {error.suggested_fix}"
            result = {"content": [{"type": "text", "text": text}], "isError": True,
                      "_meta": {ERROR_META_KEY: error.to_error()}}
        return self.finish(result)

    def as_tool_error(self, exc: BaseException) -> ToolError:
        """One error taxonomy: what a failure means for the caller; internals stay in the log."""
        name = self.tool.name if self.action is None else f"{self.tool.name}.{self.action}"
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
        if isinstance(exc, NotImplementedError):
            return ToolError(f"{name} is not supported here.", code=E_UNSUPPORTED)
        if isinstance(exc, OutputSchemaError):
            log.error("tool %r: %s [correlation id %s]", name, exc, self.cid)
            return ToolError(f"Tool {name!r} produced output that does not match its outputSchema "
                             f"(correlation id {self.cid}).", code=E_INTERNAL)
        log.error("tool %r raised [correlation id %s]", name, self.cid, exc_info=exc)
        return ToolError(f"Internal error while running tool {name!r} (correlation id {self.cid}).", code=E_INTERNAL)

    # ---------------------------------------------------------------- admission

    def admit(self) -> None:
        """Gates, bridges, rate limit and argument size, before anything of the tool runs."""
        tool, settings = self.tool, self.settings
        if settings.gate_refusal is not None:
            raise ToolError(f"Tool {tool.name!r} is not available: {settings.gate_refusal}.",
                            code=E_PERMISSION_DENIED, details={"tool": tool.name},
                            suggested_fix="Use another tool, or ask the operator to enable this one.")
        if tool.actions is not None:
            if not tool.visible:  # type: ignore[attr-defined]
                raise ToolError(f"Tool {tool.name!r} is not available: none of its actions is permitted.",
                                code=E_PERMISSION_DENIED, details={"tool": tool.name},
                                suggested_fix="Ask the operator to enable the actions this tool needs.")
            act = tool.target(self.arguments) if isinstance(self.arguments, dict) else None
            if act is not None:
                self.action = act.name
                self.target = act
                reason = settings.action_refusals.get(act.name)
                if reason is not None:
                    raise ToolError(f"Action {act.name!r} of tool {tool.name!r} is not available: {reason}.",
                                    code=E_PERMISSION_DENIED, details={"tool": tool.name, "action": act.name},
                                    suggested_fix="Use another action, or ask the operator to enable it.")
                from .manager import admit_action

                self.timeout = admit_action(act, self)
        for bridge in settings.bridges:
            if not bridge.up:
                raise bridge.not_connected_error()  # E_NOT_CONNECTED, retryable
        limiter = settings.limiter
        if limiter is not None:
            try:
                wait = limiter.check(self.principal, tool.name, settings.rate)
            except Exception as exc:  # noqa: BLE001 - a shared store that is down (StoreUnavailable)
                log.warning("rate limit of tool %r not checked: %s [correlation id %s]", tool.name, exc, self.cid)
                raise ToolError(f"Tool {tool.name!r} cannot run now: its rate limit cannot be checked.",
                                code=E_NOT_CONNECTED, retryable=True,
                                suggested_fix="Retry in a few seconds.") from None
            if wait is not None:
                raise limiter.limit_error(tool.name, wait, settings.rate or limiter.default)
        if settings.max_argument_bytes:
            limits.check_argument_size(self.arguments, settings.max_argument_bytes, tool.name)


# -------------------------------------------------------------------------- entry points


def call_tool(session: ServerSession, req: RequestReceived, tool: Tool, arguments: Any) -> Any:
    """A tools/call through the chain: a result dict, a SyncCall or a coroutine (as dispatch)."""
    return _run(_Call(session, req, tool, arguments, new_correlation_id(), None), nested=False)


def call_nested(ctx: Context, name: str, arguments: Any, *, want_async: bool) -> Any:
    """``ctx.call_tool``: a tool called from inside another, through the same chain."""
    session, req = ctx._session, ctx._request
    tool = session.server._tools.get(name)
    outer = _Call(session, req, _Unknown(name), arguments, new_correlation_id(), ctx.correlation_id)
    if tool is None:
        result = outer.fail(ToolError(f"Unknown tool: {name}", code=E_NOT_FOUND), "denied")
        return _settled(result) if want_async else result
    outcome = _run(_Call(session, req, tool, arguments, outer.cid, ctx.correlation_id), nested=True, outer=ctx)
    if isinstance(outcome, SyncCall):
        outcome = outcome.fn()
    if want_async:
        return outcome if asyncio.iscoroutine(outcome) else _settled(outcome)
    if asyncio.iscoroutine(outcome):
        outcome.close()
        raise ToolError(f"Tool {name!r} is async: await ctx.call_tool_async(...) from an async tool.",
                        code=E_UNSUPPORTED)
    return outcome


async def _settled(value: Any) -> Any:
    return value


class _Unknown:
    """Stands in for a tool that does not exist, so its refusal is audited like any other."""

    actions = None
    options = None
    annotations = None
    resolved = None

    def __init__(self, name: str) -> None:
        self.name = name


def _run(c: _Call, *, nested: bool, outer: Context | None = None) -> Any:
    session, req, tool = c.session, c.req, c.tool
    rev = req.revision
    try:
        c.admit()
    except ToolError as exc:
        return c.fail(exc, "denied")
    target = c.target
    arguments = c.arguments if c.arguments is not None else {}
    valid, errors = tool.check_arguments(arguments)
    if errors is not None:
        message = f"Invalid arguments for tool {tool.name!r}: {format_errors(errors)}"
        if not rev.invalid_arguments_as_tool_error and not nested:
            c.audit("denied", E_SCHEMA_VALIDATION)  # TL-10: before 2025-11-25 this is a protocol error
            raise McpError(INVALID_PARAMS, message, {"errors": errors})
        return c.fail(ToolError(message, code=E_SCHEMA_VALIDATION, details={"errors": errors},
                                suggested_fix="Call again with arguments that match the tool's inputSchema."),
                      "denied")
    if target is tool and tool.task is not None and rev.era == "modern" and not nested:
        from ..server import dispatch

        outcome = dispatch.start_as_task(session, req, tool, valid)
        if outcome is not None:
            c.audit("task", None)
            return outcome
    ctx: Context | None = None
    if target.context_param is not None:
        if nested:
            ctx = Context(session, req, c.cid)
            if outer is not None:
                ctx.cancelled = outer.cancelled
        else:
            ctx = session.context(req)
            ctx.correlation_id = c.cid
            if rev.era == "modern":
                ctx.rounds()  # a tampered requestState is refused before the tool runs (MR-06)
    c.ctx = ctx
    policy = c.policy
    # only a binder that converts values can meet a SandboxPath; plain JSON arguments skip this
    converts = target.bind is not None and target.bind is not _identity
    token = ACTIVE_SANDBOX.set(policy.sandbox if policy is not None else None) if converts else None
    try:
        args, kwargs = target.call_args(valid, ctx)
    except ToolError as exc:
        return c.fail(exc, "denied")
    except (BindError, TypeError, ValueError) as exc:
        return c.fail(ToolError(f"Invalid arguments for tool {tool.name!r}: {exc}", code=E_SCHEMA_VALIDATION),
                      "denied")
    finally:
        if token is not None:
            ACTIVE_SANDBOX.reset(token)
    timeout = c.timeout  # the tool's, or a manager action's own (manager.admit_action)
    if c.settings.isolated is not None and c.action in c.settings.isolated:
        return isolation.run(c, target, args, kwargs, timeout)  # a worker process, killed at the deadline
    if target.is_async:
        return _run_async(c, target, args, kwargs, timeout)
    if timeout and not nested:
        return SyncCall(partial(_run_sync_deadline, c, target, args, kwargs, timeout))
    return SyncCall(partial(_run_sync, c, target, args, kwargs))


def _run_sync(c: _Call, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], deadline: Any = None) -> Any:
    token = CORRELATION_ID.set(c.cid)
    try:
        value = target.handler(*args, **kwargs)
    except McpError:
        if _late(c, deadline):
            return None
        c.audit("error", None)
        raise
    except InputRequired:
        return None if _late(c, deadline) else c.ctx.rounds().result()  # type: ignore[union-attr]
    except Exception as exc:  # noqa: BLE001
        return None if _late(c, deadline) else c.fail(exc)
    finally:
        CORRELATION_ID.reset(token)
    return None if _late(c, deadline) else c.succeed(value)


def _late(c: _Call, deadline: Any) -> bool:
    """True when the call's deadline already answered it: what the handler did is dropped."""
    return deadline is not None and not deadline.cancel()


def _run_sync_deadline(c: _Call, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float) -> Any:
    return _run_sync(c, target, args, kwargs, _deadlines().add(timeout, c.expire))


async def _run_async(
    c: _Call, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None
) -> Any:
    token = CORRELATION_ID.set(c.cid)
    try:
        if timeout:
            task = asyncio.ensure_future(target.handler(*args, **kwargs))
            try:
                done, _ = await asyncio.wait({task}, timeout=timeout)
            except asyncio.CancelledError:
                task.cancel()  # the client cancelled the call: the handler stops too
                raise
            if not done:
                task.cancel()  # the handler's task is cancelled, then the call answered E_TIMEOUT
                if c.ctx is not None:
                    c.ctx.cancelled.set()
                await asyncio.wait({task}, timeout=1.0)
                return c.fail(_timeout_error(c, timeout))
            value = task.result()
        else:
            value = await target.handler(*args, **kwargs)
    except McpError:
        c.audit("error", None)
        raise
    except InputRequired:
        return c.ctx.rounds().result()  # type: ignore[union-attr]
    except asyncio.CancelledError:
        c.audit("cancelled", None)
        raise
    except Exception as exc:  # noqa: BLE001
        return c.fail(exc)
    finally:
        CORRELATION_ID.reset(token)
    return c.succeed(value)


def _timeout_error(c: _Call, timeout: float) -> ToolError:
    name = c.tool.name if c.action is None else f"{c.tool.name}.{c.action}"
    return ToolError(
        f"Tool {name!r} did not finish within {timeout:g} s and was stopped.",
        code=E_TIMEOUT,
        details={"timeoutMs": int(timeout * 1000)},
        suggested_fix="Retry with a smaller request, or later if the system is busy.",
    )


