"""Audit lines for resource reads and prompt gets: what a model was shown, and to whom.

Tools are audited by the policy's outcome step (policy/chain.py). A resource or a prompt
reaches data too (a template over files or records, a prompt that embeds them), so under a
policy with an audit log each ``resources/read`` and ``prompts/get`` writes one line as well,
whatever route it took and however it ended:

    {"time": ..., "correlationId": ..., "principal": ..., "resource": "notes://2026/q3",
     "arguments": {"year": "2026", "name": "q3"}, "outcome": "ok", "code": null, "durationMs": 0.4}

``prompt`` instead of ``resource`` for a prompt; ``arguments`` are the template's variables or
the prompt's arguments, redacted as a tool's are. ``outcome`` is ``ok``, ``denied`` (refused
before the handler ran: a scope, a confined path, nothing registered under that URI or name),
``error`` or ``cancelled``; ``code`` is the JSON-RPC error code of a refusal or failure. The
step runs outermost, so a refusal by any other step is recorded too. Reads are not rate-limited
here: hosts read resources in bulk (a listing, then each item), and a bucket per template would
refuse that; a middleware can limit them.

An authenticated HTTP server refuses a request that names an item its token lacks the scopes
for with 403 before any session sees it (AU-09); :func:`record_refused` writes that call's line
(``tool``, ``resource``, ``subscription``, ``prompt`` or ``completion``), outcome ``denied``,
code ``insufficient_scope`` and the ``requiredScopes`` it lacked, under the principal the
policy names (its ``principal`` function sees a stand-in session and request carrying the
token), so an audit trail shows the attempts the transport stopped too.

A request refused before its body is read names no call: a token that does not verify, a
malformed ``Authorization`` header (401) or a token without the server-wide scopes (403).
:func:`record_unauthenticated` writes its line: ``request`` (method and path), ``remote`` (the
client's address), ``code`` (the challenge's ``invalid_token``, ``invalid_request`` or
``insufficient_scope``), ``reason``, and for a verified token its principal and the
``requiredScopes`` it lacked (``principal`` is null for a token that did not verify). A request
with no credentials at all is how every client learns where to get a token (AU-06): it is not
written. Anyone can send bad credentials, so these lines are bounded (REFUSAL_LINES_PER_ADDRESS,
REFUSAL_LINES_OVERALL): a flood of them cannot rotate the calls of authenticated callers out of
the log, and the next line written says how many were held back (``withheld``).
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import weakref
from typing import Any

from ..protocol.errors import INTERNAL_ERROR, McpError
from ..server.session import new_correlation_id
from .audit import shortened
from .redact import default_redactor

__all__ = ["READ_AUDIT", "ReadAudit", "record_refused", "record_unauthenticated"]

log = logging.getLogger("mcpkit.policy")

class ReadAudit:
    """One audit line per resources/read and prompts/get (see the module's text)."""

    order = 0  # outermost, as the tools' outcome step: every refusal below it is recorded
    passes_through = True

    def on_read_resource(self, cc: Any, call_next: Any) -> Any:
        return self._sync(cc, call_next, "resource")

    async def on_read_resource_async(self, cc: Any, call_next: Any) -> Any:
        return await self._async(cc, call_next, "resource")

    def on_get_prompt(self, cc: Any, call_next: Any) -> Any:
        return self._sync(cc, call_next, "prompt")

    async def on_get_prompt_async(self, cc: Any, call_next: Any) -> Any:
        return await self._async(cc, call_next, "prompt")

    def _sync(self, cc: Any, call_next: Any, what: str) -> Any:
        start = time.perf_counter()
        try:
            result = call_next(cc)
        except BaseException as exc:
            _record(cc, what, start, exc)
            raise
        _record(cc, what, start, None)
        return result

    async def _async(self, cc: Any, call_next: Any, what: str) -> Any:
        start = time.perf_counter()
        try:
            result = call_next(cc)
            if inspect.isawaitable(result):
                result = await result
        except BaseException as exc:
            _record(cc, what, start, exc)
            raise
        _record(cc, what, start, None)
        return result


READ_AUDIT = ReadAudit()


def _shortened(audit: Any, name: str) -> str:
    """``name`` as ``audit``'s lines keep it (audit.shortened), with its redactor."""
    redactor = getattr(audit, "redactor", None) or default_redactor()
    return shortened(name, redactor.redact_text)


def _record(cc: Any, what: str, start: float, exc: BaseException | None) -> None:
    session = cc.session
    policy = session.server._policy
    audit = policy.audit if policy is not None else None
    if audit is None:
        return
    if exc is None:
        outcome, code = "ok", None
    elif not isinstance(exc, Exception):  # the request was cancelled while it ran
        outcome, code = "cancelled", None
    else:
        outcome = "error" if cc.ran else "denied"
        code = exc.code if isinstance(exc, McpError) else INTERNAL_ERROR
    name = _shortened(audit, cc.name)  # a URI can be megabytes (a template variable)
    try:
        audit.record({
            "correlationId": cc.correlation_id,
            "principal": policy.principal_of(session, cc.request),
            what: name,
            "arguments": cc.arguments,
            "outcome": outcome,
            "code": code,
            "durationMs": round((time.perf_counter() - start) * 1000.0, 3),
        })
    except Exception:  # noqa: BLE001 - a full disk must not fail the read
        log.exception("could not write the audit line of %s %r", what, name)


#: what a refused request names, by method: (the line's field, the params key naming it)
_NAMED = {"tools/call": ("tool", "name"), "prompts/get": ("prompt", "name"), "resources/read": ("resource", "uri"),
          "resources/subscribe": ("subscription", "uri"), "completion/complete": ("completion", "ref")}


class _Refused:
    """The session and request a policy's ``principal`` function is given for a request no
    session took: who sent it (``principal``, ``access_token``), what it asked."""

    outer = None
    session_id = None
    anonymous = "anonymous"

    def __init__(self, access: Any, message: dict[str, Any]) -> None:
        self.principal = access.subject
        self.access_token = access
        self.id = message.get("id")
        self.method = message.get("method")
        self.params = message.get("params")


def record_refused(server: Any, access: Any, message: dict[str, Any], missing: list[str]) -> None:
    """The audit line of a request the HTTP transport refused with 403 (see the module's text)."""
    policy = server._policy
    audit = policy.audit if policy is not None else None
    named = _NAMED.get(message.get("method"))  # type: ignore[arg-type]
    if audit is None or named is None or "id" not in message:
        return  # a notification asks for nothing to run: nothing was refused
    field, key = named
    params = message.get("params") or {}
    target = params.get(key)
    if key == "ref":  # a completion's prompt, or resource template: as completion_target reads it
        target = (target.get("uri") if target.get("type") == "ref/resource" else target.get("name")) \
            if type(target) is dict else None
    stand_in = _Refused(access, message)
    try:
        principal = policy.principal_of(stand_in, stand_in)
    except Exception:  # noqa: BLE001 - a principal function that needs a real session
        principal = access.subject
    name = _shortened(audit, target) if isinstance(target, str) else None
    arguments = params.get("arguments") if field in ("tool", "prompt") else None
    entry: dict[str, Any] = {"correlationId": new_correlation_id(), "principal": principal, field: name}
    if field == "tool":
        action = arguments.get("action") if type(arguments) is dict else None
        entry["action"] = _shortened(audit, action) if isinstance(action, str) else None
    entry.update({"arguments": arguments, "outcome": "denied", "code": "insufficient_scope",
                  "requiredScopes": missing, "durationMs": 0.0})
    try:
        audit.record(entry)
    except Exception:  # noqa: BLE001 - a full disk must not turn the 403 into a 500
        log.exception("could not write the audit line of a refused %s %r", field, name)


#: (burst, lines a second): how many lines requests refused before their body was read may write,
#: per client address and all addresses together (a client rotating addresses). Anyone can send
#: bad credentials in bulk; unbounded, their lines would rotate the log's older lines (the calls
#: of authenticated callers) out of it. Lines held back are counted on the next line written.
REFUSAL_LINES_PER_ADDRESS = (30.0, 0.5)
REFUSAL_LINES_OVERALL = (300.0, 5.0)


class _RefusalBudget:
    def __init__(self) -> None:
        from ..stores.memory import MemoryRateStore

        self.buckets = MemoryRateStore(max_keys=10_000)
        self.withheld = 0

    def allows(self, client: str) -> bool:
        now = time.monotonic()
        for key, (burst, rate) in ((f"address:{client}", REFUSAL_LINES_PER_ADDRESS),
                                   ("overall", REFUSAL_LINES_OVERALL)):
            if self.buckets.take(key, burst, rate, now):
                self.withheld += 1
                return False
        return True


_budgets: weakref.WeakKeyDictionary[Any, _RefusalBudget] = weakref.WeakKeyDictionary()
_budgets_lock = threading.Lock()


def _budget_of(audit: Any) -> _RefusalBudget:
    with _budgets_lock:
        budget = _budgets.get(audit)
        if budget is None:
            budget = _budgets[audit] = _RefusalBudget()
        return budget


def record_unauthenticated(server: Any, code: str, reason: str, request: str, remote: str | None, client: str,
                           access: Any = None, missing: list[str] | None = None) -> None:
    """The audit line of a request the HTTP transport refused before reading its body (see the
    module's text); ``access``: the verified token that lacked the server-wide scopes. At most
    REFUSAL_LINES_PER_ADDRESS and REFUSAL_LINES_OVERALL are written; the next line written says
    how many were held back (``withheld``). ``client``: whose budget it is (the address, or an
    IPv6 address's /64)."""
    policy = server._policy
    audit = policy.audit if policy is not None else None
    if audit is None:
        return
    budget = _budget_of(audit)
    if not budget.allows(client):
        return
    principal = None
    if access is not None:
        stand_in = _Refused(access, {})
        try:
            principal = policy.principal_of(stand_in, stand_in)
        except Exception:  # noqa: BLE001 - a principal function that needs a real session
            principal = access.subject
    entry: dict[str, Any] = {"correlationId": new_correlation_id(), "principal": principal,
                             "request": request[:300], "remote": remote, "outcome": "denied", "code": code,
                             "reason": reason[:500]}
    if missing is not None:
        entry["requiredScopes"] = missing
    if budget.withheld:
        entry["withheld"], budget.withheld = budget.withheld, 0
    entry["durationMs"] = 0.0
    try:
        audit.record(entry)
    except Exception:  # noqa: BLE001 - a full disk must not turn the refusal into a 500
        log.exception("could not write the audit line of a refused %s", request[:300])
