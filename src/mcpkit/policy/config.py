"""Policy: the server-wide switches, and ToolOptions: what one tool overrides.

``Server(..., policy=True)`` turns everything on with secure defaults and reads the
environment; ``Policy(...)`` picks pieces one by one. Each piece is its own module and works
alone (a Sandbox, an AuditLog, a RateLimiter can be used from plain code); this is only the
place where a server learns which of them to enforce at call time (policy/chain.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..server.session import caller_of
from ..switches import read
from . import layer as _layer
from .gates import Gates

__all__ = ["Policy", "ToolOptions", "INHERIT"]

log = logging.getLogger("mcpkit.policy")


class _Inherit:
    __slots__ = ()

    def __repr__(self) -> str:
        return "INHERIT"


#: a per-tool option left to the server's policy
INHERIT: Any = _Inherit()


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """One tool's own settings; INHERIT takes the server's, None (or False) turns one off."""

    contract: Any = INHERIT
    rate_limit: Any = INHERIT
    timeout: Any = INHERIT
    max_argument_bytes: Any = INHERIT
    max_result_bytes: Any = INHERIT
    sanitize: Any = INHERIT
    requires: tuple[Any, ...] = ()
    #: "process": each call runs in a worker process killed at its deadline (policy/isolation.py)
    isolation: str | None = None

    @classmethod
    def build(cls, *, requires: Any = None, **values: Any) -> ToolOptions | None:
        """None when nothing is set: a plain tool keeps the plain fast path."""
        given = {k: v for k, v in values.items() if v is not INHERIT}
        if requires is None:
            bridges: tuple[Any, ...] = ()
        elif isinstance(requires, (list, tuple)):
            bridges = tuple(requires)
        else:
            bridges = (requires,)
        for bridge in bridges:
            if not hasattr(bridge, "up") or not hasattr(bridge, "on_change"):
                raise TypeError(f"requires= takes mcpkit.policy.Bridge objects, not {bridge!r}")
        if "rate_limit" in given and given["rate_limit"] not in (None, False):
            from .ratelimit import Rate

            given["rate_limit"] = Rate.coerce(given["rate_limit"])
        if "timeout" in given and given["timeout"] not in (None, False):
            if not isinstance(given["timeout"], (int, float)) or given["timeout"] <= 0:
                raise ValueError("timeout must be a positive number of seconds (or None to turn it off)")
        if "isolation" in given:
            from .isolation import check_mode

            given["isolation"] = check_mode(given["isolation"])
        if not given and not bridges:
            return None
        return cls(**given, requires=bridges)


@dataclass(frozen=True)
class Policy:
    """What the server enforces on every tool call (TL-11). Anything left None is off.

    - ``gates``: which tools may run (policy/gates.py).
    - ``contract``: wrap every tool's result in the tool contract envelope (policy/envelope.py):
      ``True`` (or ``"v1"``), or ``"legacy"`` for the v1 envelope plus the earlier contracts'
      top-level ``details``, ``logs``, ``warnings``, ``errors`` and ``files``; a tool can opt
      in, out or to another shape with ``@server.tool(contract=...)``.
    - ``audit``: an AuditLog (policy/audit.py), one JSON line per call.
    - ``rate_limiter``: a RateLimiter (policy/ratelimit.py); per-tool ``rate_limit=`` overrides.
    - ``limits``: argument/result sizes, timeout and output sanitizing (policy/limits.py).
    - ``sandbox``: where SandboxPath parameters may point (policy/sandbox.py).
    - ``redact_logs``: redact secrets in the logs of the ``mcpkit`` logger and the root handlers.
    - ``principal``: ``(session, request) -> str``, who is calling; by default the authenticated
      user, else "anonymous" (stdio) or "anonymous@ADDRESS" (HTTP without auth).

    Frozen: what each tool's calls enforce is resolved once per policy, so a change is a new
    Policy (``dataclasses.replace``) assigned to ``server.policy``.
    """

    gates: Gates | None = None
    contract: bool | str = False
    audit: Any = None
    rate_limiter: Any = None
    limits: Any = None
    sandbox: Any = None
    redact_logs: bool = False
    principal: Callable[[Any, Any], str] | None = None

    #: what a server asks of the policy (the steps of each item, what a tool advertises, log
    #: redaction: server/pipeline.py PolicyLayer): a server given this Policy takes the layer
    #: from it, and never looks the policy package up
    layer: ClassVar[Any] = _layer

    @classmethod
    def secure(
        cls,
        *,
        root: str | os.PathLike[str] | list[Any] | None = None,
        audit: Any = True,
        rate_limit: Any = "600/min",
        contract: bool | str = False,
        environ: Mapping[str, str] | None = None,
        env_prefix: str = "MCPKIT_",
        gate_switches: Mapping[str, str] | None = None,
        **gates: bool,
    ) -> Policy:
        """Everything on, with the environment's switches:

        MCPKIT_READ_ONLY, MCPKIT_ALLOW_DESTRUCTIVE, MCPKIT_ALLOW_OPEN_WORLD (gates; another
        prefix with ``env_prefix="GODOT_"``, or the server's own names with
        ``gate_switches={"read_only": "READ_ONLY_MODE", "allow_destructive": "ALLOW_DANGEROUS_OPS"}``;
        ``read_only=True`` and the like set a gate in code);
        MCPKIT_ROOT (sandbox roots, os.pathsep-separated); MCPKIT_AUDIT_LOG (the audit file;
        by default ``<first root>/.mcpkit/audit.log``, or the ``mcpkit.audit`` logger on stderr
        when there is no root); MCPKIT_RATE_LIMIT (e.g. "600/min"; "off" for none);
        MCPKIT_TOOL_TIMEOUT (seconds), MCPKIT_MAX_ARGUMENT_BYTES, MCPKIT_MAX_RESULT_BYTES;
        MCPKIT_CONTRACT=1 (envelopes for every tool).
        """
        from .limits import Limits
        from .ratelimit import RateLimiter
        from .sandbox import Sandbox

        env = os.environ if environ is None else environ
        if root is None:
            root = read("MCPKIT_ROOT", env) or None
        sandbox = Sandbox(root if root is None or isinstance(root, list) else [root])
        audit_log = None
        if audit is True:
            audit_log = _default_audit(env, sandbox)
        elif audit not in (None, False):
            audit_log = audit
        rate = read("MCPKIT_RATE_LIMIT", env, rate_limit)  # the variable's off/none/0 read as None
        limiter = None if rate in (None, False, "off", "none", "0") else RateLimiter(rate)
        defaults = Limits()
        limits = Limits(
            max_argument_bytes=read("MCPKIT_MAX_ARGUMENT_BYTES", env, defaults.max_argument_bytes),
            max_result_bytes=read("MCPKIT_MAX_RESULT_BYTES", env, defaults.max_result_bytes),
            timeout=read("MCPKIT_TOOL_TIMEOUT", env, defaults.timeout),
            sanitize=True,
        )
        return cls(
            gates=Gates.from_env(env, prefix=env_prefix, names=gate_switches, **gates),
            contract=contract or read("MCPKIT_CONTRACT", env, False),
            audit=audit_log,
            rate_limiter=limiter,
            limits=limits,
            sandbox=sandbox,
            redact_logs=True,
        )

    def __post_init__(self) -> None:
        from .envelope import shape_of

        shape_of(self.contract)  # an unknown shape is refused here, not at the first tool

    def principal_of(self, session: Any, request: Any) -> str:
        if self.principal is not None:
            return self.principal(session, request)
        return caller_of(session)


def _default_audit(env: Mapping[str, str], sandbox: Any) -> Any:
    from .audit import AuditLog

    # buffered for at most a tenth of a second: the write leaves the tool call's path
    path = read("MCPKIT_AUDIT_LOG", env)
    if path:
        return AuditLog.from_env(default_path=path, environ=env, flush_interval=0.1)
    try:
        roots = sandbox.roots
    except Exception:  # noqa: BLE001 - no usable root: fall back to the log channel
        roots = ()
    if roots:
        return AuditLog.from_env(default_path=os.path.join(roots[0], ".mcpkit", "audit.log"), environ=env,
                                 flush_interval=0.1)
    return _LoggerAudit()


_LOGGED_ARGUMENT_BYTES = 4096


class _LoggerAudit:
    """The audit trail as JSON lines on the ``mcpkit.audit`` logger (stderr, never stdout)."""

    def __init__(self) -> None:
        from .redact import default_redactor

        self._redactor = default_redactor()
        self._log = logging.getLogger("mcpkit.audit")
        if self._log.level == logging.NOTSET:
            self._log.setLevel(logging.INFO)

    def record(self, entry: dict[str, Any]) -> None:
        import json

        entry = dict(entry)
        if "arguments" in entry:
            entry["arguments"] = self._redactor.redact(entry["arguments"])
        line = json.dumps(entry, default=str, ensure_ascii=False, separators=(",", ":"))
        if len(line) > _LOGGED_ARGUMENT_BYTES and "arguments" in entry:
            import hashlib

            data = json.dumps(entry["arguments"], default=str, ensure_ascii=False, separators=(",", ":")).encode()
            if len(data) > _LOGGED_ARGUMENT_BYTES:  # as AuditLog: a line keeps a summary of large arguments
                entry["arguments"] = None
                entry["argumentsTruncated"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                               "preview": data[:256].decode("utf-8", "ignore")}
                line = json.dumps(entry, default=str, ensure_ascii=False, separators=(",", ":"))
        self._log.info("%s", self._redactor.redact_text(line))

    def close(self) -> None:
        pass
