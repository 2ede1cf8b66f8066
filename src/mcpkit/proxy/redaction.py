"""Secrets in transit: ``mcpkit proxy --redact`` (docs/security.md, "Secrets leaving").

A model puts whatever its context holds into a tool's arguments, and an upstream we did not
write answers whatever it likes. With redaction on, what goes up (the arguments of a tool call or
a prompt, a resource's URI, a completion's value) and what comes back (a tool's content and
``structuredContent``, a resource's text contents, a prompt's messages, completion values) is
scanned with the detectors the audit trail uses (policy/detectors.py). In ``mask`` mode each
secret is replaced by ``[redacted:KIND]`` before it moves on; in ``refuse`` mode the call is
refused (nothing is sent upstream; a result is withheld from the client) with an error naming
each kind and where it was (a JSON pointer), never the secret. Every redaction is logged and
written to the audit trail (kind, direction, path, tool, upstream) and counted in the metrics.

Settings (:class:`RedactRule`) come per upstream, with per-tool overrides matched against the
upstream's own tool names (a glob, or a name, which applies after the globs)::

    "redact": {"mode": "mask", "arguments": true, "results": true, "kinds": ["secrets", "email"],
               "tools": {"login": {"mode": "off"}, "search_*": {"results": false}}}

Nothing here runs unless redaction is on for an upstream: the Upstream's forwarding is wrapped
only then (:func:`guard`).
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..policy.detectors import DEFAULT_KINDS, expand_kinds
from ..policy.redact import Redactor
from ..protocol.errors import E_PERMISSION_DENIED, INTERNAL_ERROR, INVALID_PARAMS, McpError, ToolError
from ..server.session import caller_of

__all__ = ["MARKER", "MODES", "RedactPolicy", "RedactRule", "guard"]

log = logging.getLogger("mcpkit.proxy")

MODES = ("mask", "refuse", "off")
MARKER = "[redacted:{kind}]"
_RULE_KEYS = {"mode", "arguments", "results", "kinds"}
#: the base64 field of binary content: an image's or audio block's ``data``, a resource's ``blob``
#: (not scanned, and secrets in them are not found); the same key anywhere else is scanned
_BINARY = {"image": "data", "audio": "data"}
_MAX_DEPTH = 100
_MAX_LISTED = 20  # findings named in one error or audit line; the count says how many more


@dataclass(frozen=True)
class RedactRule:
    """What to do with secrets for one upstream or tool: ``mode`` mask, refuse or off; which
    directions are scanned; which kinds (policy/detectors.KINDS) are looked for."""

    mode: str = "mask"
    arguments: bool = True
    results: bool = True
    kinds: tuple[str, ...] = DEFAULT_KINDS

    @property
    def on(self) -> bool:
        return self.mode != "off" and (self.arguments or self.results)

    def merged(self, value: Any, where: str) -> RedactRule:
        """This rule with the settings of ``value`` (an object of some keys, or a mode) over it."""
        if isinstance(value, str):
            value = {"mode": value}
        if not isinstance(value, dict):
            raise ValueError(f'{where}: redact must be "mask", "refuse", "off" or an object '
                             f'{{"mode": ..., "arguments": ..., "results": ..., "kinds": [...]}}')
        unknown = sorted(set(value) - _RULE_KEYS - {"tools"})
        if unknown:
            raise ValueError(f"{where}: unknown redact key(s) {', '.join(unknown)}; the keys are mode, arguments, "
                             "results, kinds, tools")
        changes: dict[str, Any] = {}
        if "mode" in value:
            if value["mode"] not in MODES:
                raise ValueError(f"{where}: redact mode must be mask, refuse or off, got {value['mode']!r}")
            changes["mode"] = value["mode"]
        for key in ("arguments", "results"):
            if key in value:
                if not isinstance(value[key], bool):
                    raise ValueError(f"{where}: redact {key} must be true or false, got {value[key]!r}")
                changes[key] = value[key]
        if "kinds" in value:
            kinds = value["kinds"]
            if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
                raise ValueError(f'{where}: redact kinds must be a list of names, e.g. ["secrets", "email"]')
            try:
                changes["kinds"] = expand_kinds(kinds)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        return replace(self, **changes)


@dataclass(frozen=True)
class RedactPolicy:
    """The rule of one upstream and its per-tool overrides (pattern -> rule), globs first, then
    exact names, each in the order given."""

    rule: RedactRule = field(default_factory=RedactRule)
    tools: tuple[tuple[str, RedactRule], ...] = ()

    @classmethod
    def of(cls, value: Any, where: str = "redact", base: RedactRule | None = None) -> RedactPolicy:
        """From a mode (``"mask"``), an object as in the module docstring, or a RedactPolicy;
        ``base``: the rule the upstream's settings apply over (``--redact``). ValueError names
        ``where`` and the fix."""
        if isinstance(value, RedactPolicy):
            return value
        rule = (base or RedactRule()).merged(value, where)
        tools = value.get("tools", {}) if isinstance(value, dict) else {}
        if not isinstance(tools, dict):
            raise ValueError(f'{where}: redact tools must be an object {{"TOOL or GLOB": {{...}}}}')
        items = [(pattern, rule.merged(setting, f"{where}.tools.{pattern}")) for pattern, setting in tools.items()]
        # globs first, exact names after them: a name wins over a glob (as in tool policy files)
        items.sort(key=lambda item: not any(c in item[0] for c in "*?["))
        return cls(rule, tuple(items))

    @property
    def on(self) -> bool:
        return self.rule.on or any(r.on for _, r in self.tools)

    def rule_for(self, tool: str | None) -> RedactRule:
        """The rule of ``tool`` (the upstream's own name); the upstream's for what is no tool."""
        found = self.rule
        if tool is not None:
            for pattern, rule in self.tools:
                if pattern == tool or fnmatch.fnmatchcase(tool, pattern):
                    found = rule
        return found


class _Scanner:
    """A Redactor per set of kinds, built once and shared by the upstream's calls."""

    def __init__(self) -> None:
        self._redactors: dict[tuple[str, ...], Redactor] = {}

    def redactor(self, kinds: tuple[str, ...]) -> Redactor:
        found = self._redactors.get(kinds)
        if found is None:
            found = self._redactors[kinds] = Redactor(kinds=kinds, marker=MARKER)
            found.compile()
        return found


def scan(value: Any, redactor: Redactor, found: list[tuple[str, str]], path: str = "", depth: int = 0) -> Any:
    """``value`` with every secret in its strings masked, the same object when clean; each
    (kind, JSON pointer) is appended to ``found``. Dict keys, numbers, ``_meta`` and binary
    content (_BINARY) are left as they are; a container nested deeper than
    _MAX_DEPTH is replaced whole (kind ``too-deep``)."""
    if isinstance(value, str):
        new, kinds = redactor.scan_text(value)
        found.extend((kind, path or "/") for kind in kinds)
        return new
    if depth >= _MAX_DEPTH and isinstance(value, (dict, list)):
        # not walked (the stack): replaced or refused whole, never passed on unscanned
        found.append(("too-deep", path))
        return MARKER.format(kind="too-deep")
    if isinstance(value, (dict, list)):
        # copied only once one of its items changed
        out: Any = None
        binary = None
        if isinstance(value, dict):
            binary = "blob" if "uri" in value else _BINARY.get(value.get("type"))
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            if isinstance(item, (int, float, bool)) or item is None or key == binary or key == "_meta":
                continue
            new = scan(item, redactor, found, f"{path}/{_escape(str(key))}", depth + 1)
            if new is not item:
                if out is None:
                    out = dict(value) if isinstance(value, dict) else list(value)
                out[key] = new
        return value if out is None else out
    return value


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")  # RFC 6901


#: what each forwarded method sends that is scanned going up
_OUTGOING = {"tools/call": "arguments", "prompts/get": "arguments", "resources/read": "uri",
             "completion/complete": None}


class _Guard:
    """The redaction of one upstream: wraps its forwarding (see :func:`guard`)."""

    def __init__(self, upstream: Any, policy: RedactPolicy) -> None:
        self.upstream = upstream
        self.policy = policy
        self.scanner = _Scanner()

    async def forward(self, forward: Callable[..., Awaitable[Any]], ctx: Any, method: str, params: dict[str, Any],
                      *, tool: bool = False) -> Any:
        name = params.get("name") if method == "tools/call" else None
        rule = self.policy.rule_for(name if isinstance(name, str) else None)
        if not rule.on:
            return await forward(ctx, method, params, tool=tool)
        redactor = self.scanner.redactor(rule.kinds)
        what = f"tool {name!r}" if tool else method
        if rule.arguments:
            found: list[tuple[str, str]] = []
            key = _OUTGOING.get(method)
            if key is None:
                scanned = {k: v for k, v in params.items() if k not in ("ref", "_meta")}
                new = scan(scanned, redactor, found)
                clean = params if new is scanned else {**params, **new}
            else:
                part = params.get(key)  # arguments: pointers into them, as validation errors say
                new = scan(part, redactor, found, "" if key == "arguments" else f"/{key}")
                clean = params if new is part else {**params, key: new}
            if found:
                self._tell(ctx, rule, what, name, "arguments", found)
                if rule.mode == "refuse":
                    raise self._refusal(tool, what, name, "arguments", found)
                params = clean
        result = await forward(ctx, method, params, tool=tool)
        if rule.results:
            found = []
            clean = scan(result, redactor, found)
            if found:
                self._tell(ctx, rule, what, name, "result", found)
                if rule.mode == "refuse":
                    raise self._refusal(tool, what, name, "result", found)
                result = clean
        return result

    def _tell(self, ctx: Any, rule: RedactRule, what: str, tool: str | None, direction: str,
              found: list[tuple[str, str]]) -> None:
        """Log, audit and count one call's redactions in one direction: kinds and paths only."""
        upstream = self.upstream.name
        action = "refused" if rule.mode == "refuse" else "masked"
        findings = [{"kind": kind, "path": path} for kind, path in found[:_MAX_LISTED]]
        log.log(logging.WARNING if action == "refused" else logging.INFO, "upstream %s: %s: %s %s in the %s: %s",
                upstream, what, action, _plural(len(found)), direction, _summary(found))
        server = self.upstream.server
        audit = getattr(server.policy, "audit", None) if server.policy is not None else None
        if audit is not None:
            entry: dict[str, Any] = {
                "correlationId": ctx.correlation_id, "principal": caller_of(ctx._session),
                "event": "redaction", "upstream": upstream, "direction": direction, "action": action,
                "findings": findings, "count": len(found), "durationMs": 0.0,
            }
            entry["tool" if tool is not None else "method"] = tool if tool is not None else what
            try:
                audit.record(entry)
            except Exception:  # noqa: BLE001 - a full disk must not fail the call
                log.exception("could not write the audit line of a redaction")
        observer = server.observer
        for each in getattr(observer, "observers", None) or ([observer] if observer is not None else []):
            count = getattr(each, "redacted", None)
            if count is not None:
                for kind, _ in found:
                    count(upstream, kind, direction, action)

    def _refusal(self, tool: bool, what: str, name: str | None, direction: str,
                 found: list[tuple[str, str]]) -> Exception:
        where = _summary(found)
        details = {"upstream": self.upstream.name, "direction": direction,
                   "findings": [{"kind": k, "path": p} for k, p in found[:_MAX_LISTED]], "count": len(found)}
        if direction == "arguments":
            subject = f"The call of {what}" if tool else f"The {what} request"
            message = (f"{subject} was not sent to upstream {self.upstream.name!r}: its arguments hold "
                       f"{_plural(len(found))} ({where}), and this proxy refuses to send secrets upstream.")
            fix = "Call it again without the secret, or ask the operator to allow it for this tool (redact mode off)."
        else:
            message = (f"The result of {what} from upstream {self.upstream.name!r} was withheld: it holds "
                       f"{_plural(len(found))} ({where}), and this proxy refuses to pass secrets on.")
            fix = "Ask the operator to mask rather than refuse secrets for this tool (redact mode mask)."
        if tool:
            return ToolError(message, code=E_PERMISSION_DENIED, details={"tool": name, **details}, retryable=False,
                             suggested_fix=fix)
        code = INVALID_PARAMS if direction == "arguments" else INTERNAL_ERROR
        return McpError(code, message, {"code": E_PERMISSION_DENIED, **details})


def _plural(n: int) -> str:
    return "a secret" if n == 1 else f"{n} secrets"


def _summary(found: list[tuple[str, str]]) -> str:
    """``aws-access-key at /headers/auth, email at /to`` (at most _MAX_LISTED, then how many more)."""
    text = ", ".join(f"{kind} at {path}" for kind, path in found[:_MAX_LISTED])
    return text + (f" and {len(found) - _MAX_LISTED} more" if len(found) > _MAX_LISTED else "")


def guard(upstream: Any, policy: Any) -> None:
    """Turn redaction on for ``upstream`` (a RedactPolicy, a mode or a settings object): its
    forwarding is wrapped. A policy that is off everywhere wraps nothing."""
    policy = RedactPolicy.of(policy)
    if not policy.on:
        return
    gate = _Guard(upstream, policy)
    forward = upstream._forward

    async def guarded(ctx: Any, method: str, params: dict[str, Any], *, tool: bool = False) -> Any:
        return await gate.forward(forward, ctx, method, params, tool=tool)

    upstream._forward = guarded
    upstream.redaction = policy
