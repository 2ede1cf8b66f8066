"""The policy layer as the server sees it (server/pipeline.py's PolicyLayer).

The server never imports the policy's modules, nor looks them up by name: it is given this
module, by each Policy (``Policy.layer``) and, for what it needs without a Policy in hand (a
tool with limits of its own, a manager tool, ``policy=True``, the secret-parameter warning, the
audit of an HTTP refusal), by the package root (mcpkit/__init__.py, through mcpkit/_wiring.py).
It asks it for the steps of each item and for the few things only the policy knows (what a
tool advertises under a contract, whether the gates list it, the default secure policy).
"""

from __future__ import annotations

from typing import Any

__all__ = ["action_scopes", "advertise", "audit_refused", "audit_unauthenticated", "check_isolated", "fuse", "manager_tool", "redact", "resolve",
           "started", "steps", "tool_options", "visible", "warm_up", "warn_secret_parameters"]


def steps(server: Any, kind: str, item: Any) -> list[Any]:
    """The policy's steps for ``item``: only those whose feature applies to it."""
    from . import chain

    policy = server._policy
    if kind == "call_tool":
        out: list[Any] = [chain.OUTCOME]
        if getattr(item, "handler", None) is None:
            return out  # a tool that does not exist: refused (and audited) as such
        settings = chain.settings_of(server, item).all()
        if item.actions is not None:
            out.append(chain.ACTION)
        if any(s.gate_refusal is not None for s in settings[:1]):
            out.append(chain.GATE)
        if any(s.bridges for s in settings):
            out.append(chain.BRIDGES)
        if any(s.limiter is not None for s in settings):
            out.append(chain.RATE_LIMIT)
        if any(s.max_argument_bytes for s in settings):
            out.append(chain.ARGUMENT_SIZE)
        if settings[0].isolated is not None:
            out.append(chain.ISOLATION)
        if any(s.timeout for s in settings):
            out.append(chain.TIMEOUT)
        if _converts(item):
            out.append(chain.SandboxStep(policy.sandbox if policy is not None else None))
        if any(s.contract for s in settings):
            out.append(chain.CONTRACT)
        return out
    if kind == "complete":
        # CP-05: completions are metered by the policy's limiter (its default rate), per principal
        limiter = policy.rate_limiter if policy is not None else None
        if limiter is not None and limiter.default is not None:
            from .ratelimit import CompletionRateLimit

            return [CompletionRateLimit(limiter)]
        return []
    out = []
    if kind in ("read_resource", "get_prompt") and policy is not None and policy.audit is not None:
        from .reads import READ_AUDIT

        out.append(READ_AUDIT)  # one audit line per read or prompt, outermost
    if kind in ("read_resource", "subscribe") and policy is not None and policy.sandbox is not None:
        from .paths import FileResourceStep, is_file_resource

        if is_file_resource(item):
            out.append(FileResourceStep(policy.sandbox))  # RS-06
    binds = getattr(item, "bind", None) is not None or getattr(item, "_bind", None) is not None
    if kind in ("read_resource", "get_prompt") and binds and policy is not None:
        out.append(chain.SandboxStep(policy.sandbox))
    return out


def fuse(server: Any, kind: str, item: Any, steps: list[Any]) -> list[Any]:
    """The policy's own steps of a sync tool, when nothing else sits among them, composed into
    one (chain.PolicedCall): the same rules in the same order, one hook to run. Not when a rule
    may wait on a shared store (a rate limit in Redis): the pipe is async then, and that rule
    waits on the stores' threads, never on the worker the tool runs on (pipeline.waits_on_store)."""
    if kind != "call_tool" or getattr(item, "is_async", True) or getattr(item, "actions", None) is not None:
        return steps
    from ..server.pipeline import waits_on_store

    if waits_on_store(steps, server):
        return steps
    from . import chain

    if steps and steps[0] is chain.OUTCOME and all(s in chain.FUSIBLE for s in steps):
        return [chain.POLICED_CALL]
    return steps


def _converts(tool: Any) -> bool:
    """Only a binder that converts values can meet a SandboxPath; plain JSON arguments skip it."""
    from ..server.schema import _identity

    binders = [tool.bind] if tool.actions is None else [a.bind for a in tool.actions.values()]
    return any(b is not None and b is not _identity for b in binders)


def resolve(value: Any) -> Any:
    """What ``Server(policy=...)`` means: True (or MCPKIT_POLICY=1 with None) is Policy.secure()."""
    from ..switches import read

    if value is None and read("MCPKIT_POLICY", default=False):
        value = True
    if value is True:
        from .config import Policy

        return Policy.secure()
    if value is False:
        return None
    return value


def tool_options(options: dict[str, Any]) -> Any:
    from .config import ToolOptions

    return ToolOptions.build(**options)


def manager_tool(server: Any, name: str, **kw: Any) -> Any:
    from .manager import ManagerTool

    return ManagerTool(server, name, **kw)


def advertise(server: Any, tool: Any) -> None:
    """Make what a tool advertises match what the policy will enforce on it."""
    if tool.actions is not None:
        tool.rebuild(server.gates)
    from .config import INHERIT
    from .envelope import shape_of

    policy = server._policy
    contract = policy.contract if policy is not None else False
    if tool.options is not None and tool.options.contract is not INHERIT:
        contract = tool.options.contract
    shape = shape_of(contract)
    if shape is not None:
        from .envelope import envelope_schema

        server._contract_spec(tool)
        tool.set_output_schema(envelope_schema(tool.result_schema, shape))
    else:
        tool.set_output_schema(tool.base_output_schema)


def visible(server: Any, tool: Any) -> bool:
    """Listed in tools/list: the gates permit it and every bridge it needs is up."""
    if tool.actions is not None and not tool.visible:
        return False
    gates = server.gates
    if gates is not None and tool.actions is None and not gates.permits(tool.annotations):
        return False
    if tool.options is not None:
        return all(bridge.up for bridge in tool.options.requires)
    return True


def action_scopes(server: Any, tool: Any) -> dict[str, tuple[str, ...]]:
    """The scopes each action of the manager tool ``tool`` needs beyond the tool's own (those of
    the tool registered with the same function), as the action step adds them: for the HTTP
    layer's 403 before anything runs (AU-09), and for a mount's mirror of the tool."""
    from .chain import settings_of

    return {name: act.scopes for name, act in settings_of(server, tool).actions.items() if act.scopes}


def started(server: Any) -> None:
    from . import chain

    chain.guard_logs(redact=server._policy.redact_logs)


def warm_up(server: Any) -> None:
    from .redact import default_redactor

    default_redactor().compile()


def redact(data: Any) -> Any:
    from .redact import default_redactor

    return default_redactor().redact(data)


def check_isolated(func: Any, name: str, context_param: str | None) -> None:
    from .isolation import check_handler

    check_handler(func, name, context_param)


def warn_secret_parameters(tool: str, properties: dict[str, Any]) -> None:
    from .hygiene import warn_secret_parameters as warn

    warn(tool, properties)


def audit_refused(server: Any, access: Any, message: dict[str, Any], missing: list[str]) -> None:
    """The audit line of a request the transport refused before dispatch (HTTP 403, AU-09);
    ``access``: the verified token it came with."""
    from .reads import record_refused

    record_refused(server, access, message, missing)


def audit_unauthenticated(server: Any, code: str, reason: str, request: str, remote: str | None, client: str,
                          access: Any = None, missing: list[str] | None = None) -> None:
    """The audit line of a request the transport refused before reading its body (HTTP 401, or
    403 for a token without the server-wide scopes)."""
    from .reads import record_unauthenticated

    record_unauthenticated(server, code, reason, request, remote, client, access, missing)
